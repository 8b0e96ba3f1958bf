/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Decoding the OperatingSystemConfig Secret (docs/contract.md §4, docs/node-protocol.md §2.1) into the few
 * values the update engine uses. Input is the Secret as the API returns it (a json_t with base64 `.data`);
 * osc.yaml is decoded non-strictly like upstream's codec: unknown fields are ignored, but a field we use
 * that has the wrong type is an error naming that field ("spec.inPlaceUpdates.kubelet: expected a string").
 * Pure: no I/O, no logging. Every size is bounded (OSC_* limits below). */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/osc-model.h"
#include "util/macro.h"

#define OSC_DATA_KEY "osc.yaml"
#define OSC_CHECKSUM_ANNOTATION "checksum/data-script"
/* A control-plane node's OSC carries this static pod manifest (upstream's node-role rule). */
#define OSC_KUBE_APISERVER_MANIFEST "/etc/kubernetes/manifests/kube-apiserver.yaml"

#define OSC_YAML_MAX (3 * 1024 * 1024) /* decoded osc.yaml; Secrets are <= 1 MiB anyway */
#define OSC_FILES_MAX 10000            /* spec.files[] + status.extensionFiles[] entries */
#define OSC_ARGS_MAX 64                /* status.inPlaceUpdates.osUpdate.args */
#define OSC_ARG_MAX 4096               /* one argument, the command, a path */
#define OSC_IMAGE_MAX 1024             /* an image reference */
#define OSC_SHORT_MAX 128              /* versions, timestamps, the checksum */

typedef struct OscDesired {
        char *checksum;               /* owned: Secret annotation checksum/data-script; NULL if absent */
        bool in_place;                /* spec.inPlaceUpdates present (an in-place pool) */
        char *os_version;             /* owned: spec.inPlaceUpdates.operatingSystemVersion; NULL if empty */
        char *kubelet_version;        /* owned: spec.inPlaceUpdates.kubelet, raw; NULL if empty */
        char *min_version_for_update; /* owned: spec.inPlaceUpdates.minVersionForUpdate; NULL if absent */
        bool has_rotation;            /* spec.inPlaceUpdates.credentialsRotation present */
        char *ca_rotation;           /* owned: ...certificateAuthorities.lastInitiationTime; NULL if unset */
        char *sa_rotation;           /* owned: ...serviceAccountKey.lastInitiationTime; NULL if unset */
        char *os_update_command;     /* owned: status.inPlaceUpdates.osUpdate.command; NULL if empty */
        char **os_update_args;       /* owned: NULL-terminated; never NULL after a successful decode */
        bool kubelet_file_found;     /* a files[] entry for the kubelet path exists */
        char *kubelet_image;         /* owned: its content.imageRef.image; NULL if it has no imageRef */
        char *kubelet_file_in_image; /* owned: its content.imageRef.filePathInImage */
        char *kubelet_file_field;    /* owned: where that entry is, e.g. "spec.files[3]"; for messages */
        char *yaml;                  /* owned: the osc.yaml bytes (NUL-terminated), for the OSC applier;
                                      * never changed after intake (the runner copies them) */
        size_t yaml_size;
        OscModel *model;    /* a reference: the whole OSC as the appliers see it, decoded once
                             * at intake (update/osc-intake.h) and shared with the OSC runner;
                             * immutable; NULL when refused or decoded without it */
        bool control_plane; /* spec.files has OSC_KUBE_APISERVER_MANIFEST (upstream reads
                             * spec.files only, not status.extensionFiles) */
        char *refused;      /* owned: why the agent refuses this OSC (the field and the
                             * reason); then nothing else but `checksum` is set and the update
                             * engine fails it with InvalidDesiredState (node-update.h) */
} OscDesired;

OscDesired *osc_desired_free(OscDesired *o);
DEFINE_CLEANUP_FUNC(OscDesired, osc_desired_free);

/* Decodes the Secret. `kubelet_path` is the configured kubelet.binaryPath: the files[] entry with that
 * path (spec.files first, then status.extensionFiles) supplies the kubelet image.
 * Errors, each with *ret_error (if not NULL) set to a message:
 *   -ENODATA  no data["osc.yaml"]: "no osc.yaml key found in OSC secret" (docs/node-protocol.md §2.2 step 1)
 *   -EBADMSG  not base64 / not YAML: "unable to decode OSC from secret data key osc.yaml: ..."
 *   -EINVAL   a field we use has the wrong type or is out of bounds: "<field path>: <why>"
 *   -EFBIG    osc.yaml larger than OSC_YAML_MAX
 *   -ENOMEM */
int osc_decode_secret(const json_t *secret, const char *kubelet_path, OscDesired **ret, char **ret_error);
/* The same, and *ret_doc (a new reference): osc.yaml parsed, for the decoders of the other views
 * (core/osc-model.h), so that an OSC is parsed once. */
int osc_decode_secret_doc(const json_t *secret, const char *kubelet_path, OscDesired **ret, json_t **ret_doc,
                          char **ret_error);

/* An OSC the agent refuses (osc_decode_secret() failed, or a check of the whole OSC did):
 * `checksum` (may be NULL, e.g. osc_secret_checksum() of an unusable Secret) and `why`, copied. */
int osc_desired_new_refused(const char *checksum, const char *why, OscDesired **ret);

/* The Secret's checksum/data-script annotation when it is a valid one, else NULL (borrowed). */
const char *osc_secret_checksum(const json_t *secret);

/* The same on osc.yaml bytes that were already extracted; `checksum` may be NULL. */
int osc_decode_yaml(const char *data, size_t size, const char *checksum, const char *kubelet_path,
                    OscDesired **ret, char **ret_error);

/* docs/contract.md §8.1: the desired kubelet version without a leading 'v' — spec.inPlaceUpdates.kubelet
 * when present, else the tag of the kubelet image. -ENODATA if neither gives one; -EINVAL, with *ret_error
 * (if not NULL) naming the field, if it is not a safe version string (version_normalize_kubelet()) or cannot
 * be a desired version (version_check_kubelet_desired(): e.g. "99999999999999999999.0.0", "../../x", a
 * 120-byte suffix that no label value can hold). */
int osc_kubelet_version(const OscDesired *o, char **ret, char **ret_error);

/* Whether the kubelet's filePathInImage names a file inside the image: not empty, no "." or ".."
 * component, no empty component ("a//b"). -EINVAL with *ret_error naming the field otherwise;
 * 0 also when there is no kubelet image. */
int osc_check_kubelet_file_in_image(const OscDesired *o, char **ret_error);

/* The tag of an image reference ("reg:5000/a/b:v1.2@sha256:..." -> "v1.2"), or -ENODATA. */
int osc_image_tag(const char *image, char **ret);
