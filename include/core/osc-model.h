/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The whole OperatingSystemConfig as the appliers need it (docs/node-protocol.md §2.1, docs/contract.md
 * §9.2): files, units, containerd config and registries, in-place fields, the kubelet config file. Where
 * core/osc.h extracts the few values the update decider uses, this module keeps everything that is written
 * to the node, already merged the way upstream merges it:
 *   - files = spec.files + status.extensionFiles, without entries whose hostName is not ours
 *     (CollectAllFiles);
 *   - units = spec.units + status.extensionUnits by name, later entries overriding enable, command
 *     and content and appending dropIns and filePaths (mergeUnits);
 *   - optionally the containerd drop-in 30-env_config.conf injected as upstream does when the OSC
 *     has a criConfig (so the diff against a last-applied OSC written by GNA is byte-identical).
 * Decoding is non-strict (unknown fields ignored), every size is bounded, and a field we use with the
 * wrong shape is an error naming the file or unit. A file whose content has none of inline, secretRef
 * and imageRef is kept as OSC_FILE_NONE (upstream skips it; the diff lists it as skipped); one with
 * more than one of them is an error. Files and units round-trip through a canonical
 * json_t of the known fields only (osc_file_to_json() / osc_file_from_json()), which is both their
 * persisted form in the work list and the "semantic deep-equal" of the diff (json_equal()).
 * Pure: no I/O, no logging. The OscModel owns every string and json_t it points to; it is
 * reference-counted (an OSC's model is decoded once, at intake, and shared: update/osc-intake.h). */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define OSC_MODEL_FILES_MAX 10000     /* files after merging */
#define OSC_MODEL_UNITS_MAX 1000      /* units after merging */
#define OSC_MODEL_DROPINS_MAX 256     /* drop-ins of one unit after merging */
#define OSC_MODEL_FILE_PATHS_MAX 1024 /* filePaths of one unit after merging */
#define OSC_MODEL_REGISTRIES_MAX 256
#define OSC_MODEL_HOSTS_MAX 64 /* hosts of one registry */
#define OSC_MODEL_PATH_MAX 4096
#define OSC_MODEL_NAME_MAX 256 /* unit, drop-in, secret names, upstreams */

#define OSC_KUBELET_CONFIG_PATH "/var/lib/kubelet/config/kubelet"
#define OSC_CONTAINERD_UNIT "containerd.service"
#define OSC_CONTAINERD_SOCKET "/run/containerd/containerd.sock" /* below osc.rootDirectory */
#define OSC_CONTAINERD_DROPIN "30-env_config.conf"
#define OSC_CONTAINERD_BIN_DIR "/var/bin/containerruntimes"

typedef enum OscFileSource {
        OSC_FILE_INLINE,
        OSC_FILE_SECRET, /* content.secretRef: fetched at apply time (uncached GET) */
        OSC_FILE_IMAGE,  /* content.imageRef: pulled from a registry */
        OSC_FILE_NONE,   /* none of the three: skipped, as upstream skips it (never written) */
} OscFileSource;

typedef struct OscFile {
        char *path;
        bool has_permissions;
        uint32_t permissions; /* valid if has_permissions; the mode is this or 0600 */
        OscFileSource source;
        bool b64;                       /* inline: encoding "b64" (else plain "") */
        char *data;                     /* inline: the raw (still encoded) data */
        char *secret_name, *secret_key; /* secretRef */
        char *image, *file_in_image;    /* imageRef */
        int transmit_unencoded;         /* -1 unset, else 0/1; kept only for equality */
        char *host_name;                /* NULL: every host */
        bool in_status;                 /* from status.extensionFiles (not part of the canonical form) */
} OscFile;

typedef enum OscUnitCommand {
        OSC_UNIT_COMMAND_START,
        OSC_UNIT_COMMAND_RESTART,
        OSC_UNIT_COMMAND_STOP,
        _OSC_UNIT_COMMAND_MAX,
        _OSC_UNIT_COMMAND_INVALID = -EINVAL,
} OscUnitCommand;

const char *osc_unit_command_to_string(OscUnitCommand c);
OscUnitCommand osc_unit_command_from_string(const char *s);

typedef struct OscDropIn {
        char *name;
        char *content;
} OscDropIn;

typedef struct OscUnit {
        char *name;
        OscUnitCommand command; /* _OSC_UNIT_COMMAND_INVALID when unset */
        int enable;             /* -1 unset, else 0/1 */
        char *content;          /* NULL: the agent writes no unit file (OS units with drop-ins) */
        OscDropIn *drop_ins;
        size_t n_drop_ins;
        char **file_paths; /* n_file_paths entries, not NULL-terminated */
        size_t n_file_paths;
} OscUnit;

typedef struct OscRegistryHost {
        char *url;
        char **capabilities; /* NULL-terminated or NULL (default: pull, resolve) */
        char **ca_certs;     /* NULL-terminated or NULL */
        int override_path;   /* -1 unset, else 0/1 */
} OscRegistryHost;

typedef struct OscRegistry {
        char *upstream;
        char *server; /* NULL if unset */
        OscRegistryHost *hosts;
        size_t n_hosts;
        bool readiness_probe;
        json_t *canon; /* the known fields, for equality and persistence */
} OscRegistry;

typedef struct OscModel {
        unsigned n_ref; /* 1 from the decoder (0, by hand, counts as 1) */
        OscFile *files; /* in the OSC's order, one per path */
        size_t n_files;
        size_t *files_by_path; /* indices into files, sorted by path (osc_model_find_file) */
        OscUnit *units;
        size_t n_units;

        bool has_cri;              /* spec.criConfig present */
        bool has_containerd;       /* spec.criConfig.containerd present */
        json_t *containerd_config; /* {sandboxImage, plugins, cgroupDriver}: what restarts containerd */
        OscRegistry *registries;
        size_t n_registries;

        bool in_place; /* spec.inPlaceUpdates present */
        char *os_version;
        char *kubelet_version;
        bool has_rotation;                     /* spec.inPlaceUpdates.credentialsRotation present */
        bool has_ca_rotation, has_sa_rotation; /* their structs present */
        char *ca_rotation, *sa_rotation;       /* lastInitiationTime, NULL if unset */
} OscModel;

typedef struct OscModelOptions {
        const char *host_name; /* lower-case hostname for the hostName filter; NULL: drop all filtered */
        const char *containerd_path; /* the agent's PATH for the injected drop-in; NULL: inject nothing */
} OscModelOptions;

/* A model is immutable once decoded, so it can be shared: osc_model_ref() takes one more reference,
 * osc_model_free() drops one and frees the model with the last. */
OscModel *osc_model_ref(OscModel *m);
OscModel *osc_model_free(OscModel *m);
DEFINE_CLEANUP_FUNC(OscModel, osc_model_free);

/* Decodes osc.yaml bytes (-EBADMSG not YAML, -EINVAL a bad field, -EFBIG too large, -ENOMEM), or an
 * already parsed document. *ret_error (if not NULL) names the field, file or unit. */
int osc_model_decode_yaml(const char *data, size_t size, const OscModelOptions *opts, OscModel **ret,
                          char **ret_error);
int osc_model_decode(const json_t *doc, const OscModelOptions *opts, OscModel **ret, char **ret_error);

/* The file at `path`: a binary search, so diffing two 10,000-file OSCs stays O(n log n). */
const OscFile *osc_model_find_file(const OscModel *m, const char *path);
const OscUnit *osc_model_find_unit(const OscModel *m, const char *name);

/* An absolute path without "." or ".." components and without a trailing slash (a file is named, not a
 * directory), joined below osc.rootDirectory by the appliers. */
bool osc_path_valid(const char *p);
/* One path component: a unit, drop-in or registry upstream name. */
bool osc_name_valid(const char *n);

/* The mode a file is written with: the permission bits (0777) of its permissions, else 0600. As
 * upstream (Go's os.FileMode(permissions).Perm()): setuid, setgid and sticky bits are never applied,
 * though the canonical form keeps the value as given (so the diff against GNA's last-applied OSC
 * stays exact). */
static inline uint32_t osc_file_mode(const OscFile *f) {
        return f->has_permissions ? f->permissions & 0777 : 0600;
}

/* The decoded content of an inline file (-EINVAL for a file that is not inline, -EBADMSG bad base64).
 * The result is NUL-terminated; *ret_size excludes the NUL. */
int osc_file_inline_content(const OscFile *f, char **ret, size_t *ret_size);

/* "stop" if enable is false or command is stop, else "restart" (getCommandToExecute). */
OscUnitCommand osc_unit_effective_command(const OscUnit *u);
/* Whether the unit lists `path` in filePaths. */
bool osc_unit_lists_file(const OscUnit *u, const char *path);
/* The paths that belong only to units of `units` (osc.replacedUnits): one of them lists the path in
 * filePaths and no other unit does. Such a file (gardener-node-agent's binary, its config) is the
 * replaced unit's alone: never pulled, never a drift finding, never a reason to restart another
 * unit. *ret: a string list (NULL when there are none; strings borrowed from the model). -ENOMEM. */
int osc_model_files_only_for_units(const OscModel *m, char *const *units, const char ***ret);

/* Canonical forms: only known fields, absent optional fields left out, empty lists left out. */
json_t *osc_file_to_json(const OscFile *f);
json_t *osc_unit_to_json(const OscUnit *u);
/* The inverse, with the same checks as the OSC decoder; `where` prefixes error messages. */
int osc_file_from_json(const json_t *j, const char *where, OscFile *ret, char **ret_error);
int osc_unit_from_json(const json_t *j, const char *where, OscUnit *ret, char **ret_error);
int osc_registry_from_json(const json_t *j, const char *where, OscRegistry *ret, char **ret_error);
void osc_file_done(OscFile *f);
void osc_unit_done(OscUnit *u);
void osc_registry_done(OscRegistry *r);
int osc_file_copy(const OscFile *f, OscFile *ret);
int osc_unit_copy(const OscUnit *u, OscUnit *ret);
int osc_registry_copy(const OscRegistry *r, OscRegistry *ret);

/* The kubelet config values the in-place rules read (docs/node-protocol.md §2.3 step 4), from the spec.files
 * entry OSC_KUBELET_CONFIG_PATH (inline). -ENODATA with "kubelet config file with path: ... not found in
 * OSC", -EBADMSG if it is not a KubeletConfiguration document. *ret is a new reference. */
int osc_model_kubelet_config(const OscModel *m, json_t **ret, char **ret_error);

/* containerd's certs.d/<upstream>/hosts.toml for a registry, as upstream's template renders it. */
int osc_registry_hosts_toml(const OscRegistry *r, char **ret);
