/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/osc-model.h"
#include "core/osc.h"
#include "core/version.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/json-util.h"
#include "util/yaml-json.h"

typedef enum StringKind {
        STRING_SHORT, /* versions, timestamps, checksum: printable ASCII, no quotes */
        STRING_ARG,   /* command, args, paths: anything but NUL */
        STRING_IMAGE, /* image references: no whitespace or control characters */
} StringKind;

static const size_t kind_max[] = {
        [STRING_SHORT] = OSC_SHORT_MAX,
        [STRING_ARG] = OSC_ARG_MAX,
        [STRING_IMAGE] = OSC_IMAGE_MAX,
};

OscDesired *osc_desired_free(OscDesired *o) {
        if (!o)
                return NULL;
        free(o->checksum);
        free(o->os_version);
        free(o->kubelet_version);
        free(o->min_version_for_update);
        free(o->ca_rotation);
        free(o->sa_rotation);
        free(o->os_update_command);
        strv_freep(&o->os_update_args);
        free(o->kubelet_image);
        free(o->kubelet_file_in_image);
        free(o->kubelet_file_field);
        free(o->yaml);
        osc_model_free(o->model);
        free(o->refused);
        free(o);
        return NULL;
}

int osc_desired_new_refused(const char *checksum, const char *why, OscDesired **ret) {
        _cleanup_(osc_desired_freep) OscDesired *o = NULL;

        assert(why);
        assert(ret);

        o = calloc(1, sizeof(*o));
        if (!o || !(o->refused = strdup(why)) || (checksum && !(o->checksum = strdup(checksum))))
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static bool string_ok(const char *s, size_t len, StringKind kind) {
        if (len > kind_max[kind] || strlen(s) != len) /* embedded NUL */
                return false;
        for (const unsigned char *c = (const unsigned char *) s; *c; c++)
                switch (kind) {
                case STRING_SHORT:
                        if (*c < 0x20 || *c >= 0x7f || *c == '"' || *c == '\\')
                                return false;
                        break;
                case STRING_IMAGE:
                        if (*c <= 0x20 || *c == 0x7f)
                                return false;
                        break;
                case STRING_ARG:
                        break;
                }
        return true;
}

/* A string field of `obj` checked for its kind: absent, null and "" all yield NULL (Go's zero
 * value), anything but a string is an error naming the field. */
static int get_string(const json_t *obj, const char *where, const char *key, StringKind kind,
                      JsonFieldFlags flags, char **ret, char **ret_error) {
        int r;

        r = json_field_string(obj, where, key, kind_max[kind], flags | JSON_FIELD_EMPTY_IS_UNSET, ret,
                              ret_error);
        if (r < 0 || !*ret || string_ok(*ret, strlen(*ret), kind))
                return r;
        *ret = mfree(*ret);
        return json_field_error(ret_error, where, key, "invalid or longer than %zu bytes", kind_max[kind]);
}

static int decode_rotation(const json_t *rot, OscDesired *o, char **ret_error) {
        static const char w[] = "spec.inPlaceUpdates.credentialsRotation";
        const json_t *ca, *sa;
        int r;

        o->has_rotation = true;
        r = json_field_object(rot, w, "certificateAuthorities", &ca, ret_error);
        if (r >= 0)
                r = json_field_object(rot, w, "serviceAccountKey", &sa, ret_error);
        if (r >= 0)
                r = get_string(ca, "spec.inPlaceUpdates.credentialsRotation.certificateAuthorities",
                               "lastInitiationTime", STRING_SHORT, 0, &o->ca_rotation, ret_error);
        if (r >= 0)
                r = get_string(sa, "spec.inPlaceUpdates.credentialsRotation.serviceAccountKey",
                               "lastInitiationTime", STRING_SHORT, 0, &o->sa_rotation, ret_error);
        return r;
}

static int decode_in_place(const json_t *ipu, OscDesired *o, char **ret_error) {
        const json_t *rot;
        int r;

        static const char w[] = "spec.inPlaceUpdates";

        o->in_place = true;
        r = get_string(ipu, w, "operatingSystemVersion", STRING_SHORT, 0, &o->os_version, ret_error);
        if (r >= 0)
                r = get_string(ipu, w, "kubelet", STRING_SHORT, 0, &o->kubelet_version, ret_error);
        if (r >= 0)
                r = get_string(ipu, w, "minVersionForUpdate", STRING_SHORT, 0, &o->min_version_for_update,
                               ret_error);
        if (r >= 0)
                r = json_field_object(ipu, w, "credentialsRotation", &rot, ret_error);
        if (r < 0 || !rot)
                return r;
        return decode_rotation(rot, o, ret_error);
}

static int decode_os_update(const json_t *osu, OscDesired *o, char **ret_error) {
        static const char w[] = "status.inPlaceUpdates.osUpdate";
        int r;

        r = get_string(osu, w, "command", STRING_ARG, 0, &o->os_update_command, ret_error);
        if (r >= 0)
                r = json_field_strv(osu, w, "args", OSC_ARGS_MAX, OSC_ARG_MAX, 0, &o->os_update_args,
                                    ret_error);
        return r;
}

static int decode_kubelet_file(const json_t *file, const char *path, OscDesired *o, char **ret_error) {
        _cleanup_free_ char *p_content = NULL, *p_ref = NULL;
        const json_t *content, *ref;
        int r;

        o->kubelet_file_found = true;
        if (asprintf(&p_content, "%s.content", path) < 0 ||
            asprintf(&p_ref, "%s.content.imageRef", path) < 0)
                return -ENOMEM;

        r = json_field_object(file, path, "content", &content, ret_error);
        if (r >= 0)
                r = json_field_object(content, p_content, "imageRef", &ref, ret_error);
        if (r < 0 || !ref)
                return r; /* inline content: no image to stage; the plan says so */

        r = get_string(ref, p_ref, "image", STRING_IMAGE, JSON_FIELD_REQUIRED, &o->kubelet_image, ret_error);
        if (r >= 0)
                r = get_string(ref, p_ref, "filePathInImage", STRING_ARG, JSON_FIELD_REQUIRED,
                               &o->kubelet_file_in_image, ret_error);
        if (r < 0)
                return r;
        return free_and_strdup(&o->kubelet_file_field, path);
}

/* Finds the kubelet entry in one files list ("spec.files" or "status.extensionFiles"). Every entry's
 * shape is checked up to `path`, the only member we read from the others. */
static int scan_files(const json_t *files, const char *list, const char *kubelet_path, size_t *n_seen,
                      OscDesired *o, char **ret_error) {
        const json_t *f;
        size_t i;

        json_array_foreach(files, i, f) {
                const json_t *path;

                if (++*n_seen > OSC_FILES_MAX)
                        return error_setf(ret_error, -EINVAL, "%s: more than %d files", list, OSC_FILES_MAX);
                if (!json_is_object(f))
                        return error_setf(ret_error, -EINVAL, "%s[%zu]: expected an object", list, i);
                path = json_object_get(f, "path");
                if (path && !json_is_string(path))
                        return error_setf(ret_error, -EINVAL, "%s[%zu].path: expected a string", list, i);
                if (path && streq(list, "spec.files") &&
                    streq(json_string_value(path), OSC_KUBE_APISERVER_MANIFEST))
                        o->control_plane = true;
                if (!o->kubelet_file_found && path && kubelet_path &&
                    streq(json_string_value(path), kubelet_path)) {
                        _cleanup_free_ char *where = NULL;
                        int r;

                        if (asprintf(&where, "%s[%zu]", list, i) < 0)
                                return -ENOMEM;
                        r = decode_kubelet_file(f, where, o, ret_error);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int decode_document(const json_t *doc, const char *kubelet_path, OscDesired *o, char **ret_error) {
        const json_t *kind, *spec, *status, *ipu, *sipu, *osu, *files;
        size_t n_files = 0;
        int r;

        if (!json_is_object(doc))
                return error_setf(ret_error, -EINVAL, "osc.yaml: expected an OperatingSystemConfig object");
        kind = json_object_get(doc, "kind");
        if (kind && !(json_is_string(kind) && streq(json_string_value(kind), "OperatingSystemConfig")))
                return error_setf(ret_error, -EINVAL, "kind: expected OperatingSystemConfig");

        r = json_field_object(doc, NULL, "spec", &spec, ret_error);
        if (r >= 0)
                r = json_field_object(doc, NULL, "status", &status, ret_error);
        if (r >= 0)
                r = json_field_object(spec, "spec", "inPlaceUpdates", &ipu, ret_error);
        if (r >= 0 && ipu)
                r = decode_in_place(ipu, o, ret_error);
        if (r >= 0)
                r = json_field_object(status, "status", "inPlaceUpdates", &sipu, ret_error);
        if (r >= 0)
                r = json_field_object(sipu, "status.inPlaceUpdates", "osUpdate", &osu, ret_error);
        if (r >= 0 && osu)
                r = decode_os_update(osu, o, ret_error);
        /* Upstream merges spec.files and status.extensionFiles (CollectAllFiles); spec wins here. */
        if (r >= 0)
                r = json_field_array(spec, "spec", "files", &files, ret_error);
        if (r >= 0)
                r = scan_files(files, "spec.files", kubelet_path, &n_files, o, ret_error);
        if (r >= 0)
                r = json_field_array(status, "status", "extensionFiles", &files, ret_error);
        if (r >= 0)
                r = scan_files(files, "status.extensionFiles", kubelet_path, &n_files, o, ret_error);
        return r;
}

static int decode_yaml_doc(const char *data, size_t size, const char *checksum, const char *kubelet_path,
                           OscDesired **ret, json_t **ret_doc, char **ret_error) {
        _cleanup_(osc_desired_freep) OscDesired *o = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        _cleanup_free_ char *yerr = NULL;
        int r;

        assert(data || size == 0);
        assert(ret);

        if (size > OSC_YAML_MAX)
                return error_setf(ret_error, -EFBIG, "osc.yaml is larger than %d bytes", OSC_YAML_MAX);
        if (checksum && !string_ok(checksum, strlen(checksum), STRING_SHORT))
                return error_setf(ret_error, -EINVAL,
                                  "metadata.annotations.%s: invalid or longer than %d bytes",
                                  OSC_CHECKSUM_ANNOTATION, OSC_SHORT_MAX);

        o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        if (!isempty(checksum)) {
                o->checksum = strdup(checksum);
                if (!o->checksum)
                        return -ENOMEM;
        }

        r = yaml_to_json(data, size, &doc, &yerr);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return error_setf(ret_error, -EBADMSG,
                                  "unable to decode OSC from secret data key osc.yaml: %s",
                                  yerr ? yerr : strerror(-r));

        r = decode_document(doc, kubelet_path, o, ret_error);
        if (r < 0)
                return r;
        o->yaml = malloc(size + 1);
        if (!o->yaml)
                return -ENOMEM;
        if (size > 0)
                memcpy(o->yaml, data, size);
        o->yaml[size] = 0;
        o->yaml_size = size;

        if (!o->os_update_args) {
                o->os_update_args = calloc(1, sizeof(char *));
                if (!o->os_update_args)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(o);
        if (ret_doc)
                *ret_doc = TAKE_PTR(doc);
        return 0;
}

int osc_decode_yaml(const char *data, size_t size, const char *checksum, const char *kubelet_path,
                    OscDesired **ret, char **ret_error) {
        return decode_yaml_doc(data, size, checksum, kubelet_path, ret, NULL, ret_error);
}

const char *osc_secret_checksum(const json_t *secret) {
        const json_t *c =
                json_object_get(json_object_get(json_object_get(secret, "metadata"), "annotations"),
                                OSC_CHECKSUM_ANNOTATION);

        return json_is_string(c) && json_string_length(c) > 0 &&
                        string_ok(json_string_value(c), json_string_length(c), STRING_SHORT) ?
                json_string_value(c) :
                NULL;
}

int osc_decode_secret(const json_t *secret, const char *kubelet_path, OscDesired **ret, char **ret_error) {
        return osc_decode_secret_doc(secret, kubelet_path, ret, NULL, ret_error);
}

int osc_decode_secret_doc(const json_t *secret, const char *kubelet_path, OscDesired **ret, json_t **ret_doc,
                          char **ret_error) {
        _cleanup_free_ char *yaml = NULL;
        const json_t *data, *value, *meta, *annotations, *checksum = NULL;
        size_t size;
        int r;

        assert(ret);

        if (!json_is_object(secret))
                return error_setf(ret_error, -EINVAL, "secret: expected an object");

        meta = json_object_get(secret, "metadata");
        annotations = json_is_object(meta) ? json_object_get(meta, "annotations") : NULL;
        if (json_is_object(annotations))
                checksum = json_object_get(annotations, OSC_CHECKSUM_ANNOTATION);
        if (checksum && !json_is_string(checksum))
                return error_setf(ret_error, -EINVAL, "metadata.annotations.%s: expected a string",
                                  OSC_CHECKSUM_ANNOTATION);

        data = json_object_get(secret, "data");
        value = json_is_object(data) ? json_object_get(data, OSC_DATA_KEY) : NULL;
        if (!value || json_is_null(value))
                return error_setf(ret_error, -ENODATA, "no osc.yaml key found in OSC secret");
        if (!json_is_string(value))
                return error_setf(ret_error, -EINVAL, "data.osc.yaml: expected a base64 string");
        if (json_string_length(value) > (size_t) OSC_YAML_MAX / 3 * 4 + 4)
                return error_setf(ret_error, -EFBIG, "osc.yaml is larger than %d bytes", OSC_YAML_MAX);

        r = base64_decode_full(json_string_value(value), json_string_length(value), /* strict= */ true,
                               SIZE_MAX, &yaml, &size);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return error_setf(ret_error, -EBADMSG,
                                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data");

        return decode_yaml_doc(yaml, size, checksum ? json_string_value(checksum) : NULL, kubelet_path, ret,
                               ret_doc, ret_error);
}

int osc_image_tag(const char *image, char **ret) {
        const char *slash, *colon, *at, *name;
        size_t len;
        char *t;

        assert(image);
        assert(ret);

        /* The tag is the part after the last ':' of the last path component, before any digest;
         * a ':' in the first component of "host:5000/x" is a port, not a tag. */
        at = strchr(image, '@');
        len = at ? (size_t) (at - image) : strlen(image);
        slash = memrchr(image, '/', len);
        name = slash ? slash + 1 : image;
        colon = memchr(name, ':', len - (size_t) (name - image));
        if (!colon || colon + 1 == image + len)
                return -ENODATA;

        t = strndup(colon + 1, len - (size_t) (colon + 1 - image));
        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

int osc_kubelet_version(const OscDesired *o, char **ret, char **ret_error) {
        _cleanup_free_ char *tag = NULL, *v = NULL;
        const char *raw, *why = "only [0-9A-Za-z.+_-] starting with a digit may name a version";
        bool from_spec = o->in_place && o->kubelet_version;
        int r;

        assert(o);
        assert(ret);

        if (from_spec)
                raw = o->kubelet_version;
        else {
                if (!o->kubelet_image)
                        return -ENODATA;
                r = osc_image_tag(o->kubelet_image, &tag);
                if (r == -ENODATA)
                        why = "the image has no tag";
                else if (r < 0)
                        return r;
                raw = strempty(tag);
        }
        r = tag || from_spec ? version_normalize_kubelet(raw, &v) : -EINVAL;
        if (r == -ENOMEM)
                return r;
        if (r >= 0)
                r = version_check_kubelet_desired(v, &why);
        if (r < 0)
                return error_setf(ret_error, -EINVAL, "%s%s: \"%s\" is not a valid kubelet version: %s",
                                  from_spec ? "spec.inPlaceUpdates.kubelet" :
                                              strempty(o->kubelet_file_field),
                                  from_spec ? "" : ".content.imageRef.image (its tag)", raw, why);
        *ret = TAKE_PTR(v);
        return 0;
}

int osc_check_kubelet_file_in_image(const OscDesired *o, char **ret_error) {
        const char *p = o->kubelet_file_in_image, *why = NULL;

        assert(o);

        if (!o->kubelet_image)
                return 0;
        if (isempty(p))
                why = "must not be empty";
        else {
                /* Each component between slashes; a leading slash is fine ("/kubelet"). */
                for (const char *c = p + (*p == '/'); !why;) {
                        size_t n = strcspn(c, "/");

                        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                                why = "must be a normalised path inside the image, without \"..\", \".\" or empty "
                                      "components";
                        if (!c[n])
                                break;
                        c += n + 1;
                }
        }
        if (!why)
                return 0;
        return error_setf(ret_error, -EINVAL, "%s.content.imageRef.filePathInImage: \"%s\" %s",
                          strempty(o->kubelet_file_field), strempty(p), why);
}
