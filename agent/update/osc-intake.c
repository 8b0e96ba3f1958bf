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
                return error_setf(ret_error, -EINVAL,
                                  "file \"%s\": content.imageRef.image %s%s is not a valid image "
                                  "reference: %s",
                                  f->path, quoted, strlen(f->image) > IMAGE_DISPLAY_MAX ? "..." : "",
                                  strempty(why));
        }
        return 0;
}

/* 0 when the whole OSC can be used; -EINVAL (or another -errno) with *ret_error when not. `doc` is
 * osc.yaml as parsed once by osc_decode_secret_doc(). */
static int check(const json_t *doc, char *const *replaced_units, OscModel **ret_all,
                 OscComponentConfig **ret_component, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        int r;

        /* No hostName filter: a file meant for another host is checked all the same. */
        r = osc_model_decode(doc, &(OscModelOptions) {}, &m, ret_error);
        if (r < 0)
                return r;
        r = check_images(m, ret_error);
        if (r < 0)
                return r;
        r = osc_component_config_from_model(m, replaced_units, ret_component, ret_error);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret_all = TAKE_PTR(m);
        return 0;
}

/* The model the runner applies: this host's files, containerd's drop-in. The same as the checked one
 * when there is neither to filter nor to inject. One that does not decode here (the injected drop-in
 * is one too many) stays NULL: the runner decodes the bytes and fails the OSC as before. */
static int applied_model(const json_t *doc, OscModel *all, const OscModelOptions *opts, OscModel **ret) {
        int r;

        if (!opts || (!opts->host_name && !opts->containerd_path)) {
                *ret = osc_model_ref(all);
                return 0;
        }
        r = osc_model_decode(doc, opts, ret, NULL);
        return r == -ENOMEM ? r : 0;
}

int osc_intake(const json_t *secret, const char *kubelet_path, char *const *replaced_units,
               const OscModelOptions *model_options, OscDesired **ret_osc,
               OscComponentConfig **ret_component) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_(osc_desired_freep) OscDesired *osc = NULL;
        _cleanup_(osc_model_freep) OscModel *all = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        assert(ret_osc);
        assert(ret_component);

        r = osc_decode_secret_doc(secret, kubelet_path, &osc, &doc, &error);
        if (r >= 0)
                r = check(doc, replaced_units, &all, &cc, &error);
        if (r >= 0)
                r = applied_model(doc, all, model_options, &osc->model);
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
