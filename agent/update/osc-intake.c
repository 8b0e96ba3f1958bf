/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "oci/oci-ref.h"
#include "update/osc-intake.h"
#include "util/error-message.h"
#include "util/utf8.h"

#define IMAGE_DISPLAY_MAX 200

/* Every imageRef of the model, the kubelet's among them. */
static int check_images(const OscModel *m, char **ret_error) {
        for (size_t i = 0; i < m->n_files; i++) {
                const OscFile *f = &m->files[i];
                _cleanup_free_ char *quoted = NULL;
                const char *why = NULL;
                int r;

                if (f->source != OSC_FILE_IMAGE)
                        continue;
                r = oci_ref_check(f->image, &why);
                if (r == 0)
                        continue;
                if (r != -EINVAL)
                        return r;
                quoted = utf8_quote(f->image, MIN(strlen(f->image), (size_t) IMAGE_DISPLAY_MAX));
                if (!quoted)
                        return -ENOMEM;
                return error_setf(ret_error, -EINVAL, "file \"%s\": content.imageRef.image %s%s is not a valid image "
                                  "reference: %s", f->path, quoted, strlen(f->image) > IMAGE_DISPLAY_MAX ? "..." : "",
                                  strempty(why));
        }
        return 0;
}

/* 0 when the whole OSC can be used; -EINVAL (or another -errno) with *ret_error when not. */
static int check(const OscDesired *osc, char *const *replaced_units, OscComponentConfig **ret_component,
                 char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        int r;

        /* No hostName filter: a file meant for another host is checked all the same. */
        r = osc_model_decode_yaml(osc->yaml, osc->yaml_size, &(OscModelOptions) {}, &m, ret_error);
        if (r < 0)
                return r;
        r = check_images(m, ret_error);
        if (r < 0)
                return r;
        r = osc_component_config_from_model(m, replaced_units, ret_component, ret_error);
        return r == -ENOENT ? 0 : r;
}

int osc_intake(const json_t *secret, const char *kubelet_path, char *const *replaced_units, OscDesired **ret_osc,
               OscComponentConfig **ret_component) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_(osc_desired_freep) OscDesired *osc = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        assert(ret_osc);
        assert(ret_component);

        r = osc_decode_secret(secret, kubelet_path, &osc, &error);
        if (r >= 0)
                r = check(osc, replaced_units, &cc, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                osc = osc_desired_free(osc);
                cc = osc_component_config_free(cc);
                r = osc_desired_new_refused(osc_secret_checksum(secret), error ?: strerror(-r), &osc);
                if (r < 0)
                        return r;
        }
        *ret_osc = TAKE_PTR(osc);
        *ret_component = TAKE_PTR(cc);
        return 0;
}
