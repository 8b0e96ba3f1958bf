/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "build-config.h"
#include "core/config.h"
#include "core/kube-name.h"
#include "core/unit-name.h"
#include "util/time-util.h"

typedef enum KeyType {
        KEY_SECTION,
        KEY_STRING,    /* any string, may be empty */
        KEY_PATH,      /* absolute path */
        KEY_PATH_OPT,  /* absolute path or "" */
        KEY_URL,       /* http:// or https:// */
        KEY_DNS_NAME,  /* RFC 1123 subdomain, or "" for "derive it" */
        KEY_DNS_LABEL, /* RFC 1123 label (namespace) */
        KEY_UNIT,      /* systemd unit name, normalized */
        KEY_DURATION,
        KEY_UINT,
        KEY_BOOL,
        KEY_BACKEND,
        KEY_REBOOT,
        KEY_DRIFT_REPAIR,
        KEY_MIRRORS,
        KEY_UNIT_LIST, /* list of systemd unit names, normalized */
} KeyType;

typedef struct KeyDef {
        const char *path;
        KeyType type;
        size_t offset;
        uint64_t min, max; /* KEY_DURATION (usec) and KEY_UINT */
} KeyDef;

#define OFF(f) offsetof(Config, f)
#define SEC(p) \
        { p, KEY_SECTION, 0, 0, 0 }
#define MINUTE (60 * USEC_PER_SEC)
#define HOUR (60 * MINUTE)

static const KeyDef keys[] = {
        { "nodeName", KEY_DNS_NAME, OFF(node_name), 0, 0 },
        { "kubeconfig", KEY_PATH, OFF(kubeconfig), 0, 0 },
        { "bootstrapKubeconfig", KEY_PATH, OFF(bootstrap_kubeconfig), 0, 0 },
        { "stateDirectory", KEY_PATH, OFF(state_directory), 0, 0 },
        { "osRelease", KEY_PATH, OFF(os_release), 0, 0 },
        SEC("osc"),
        { "osc.namespace", KEY_DNS_LABEL, OFF(osc.namespace), 0, 0 },
        { "osc.secretName", KEY_DNS_NAME, OFF(osc.secret_name), 0, 0 },
        { "osc.rootDirectory", KEY_PATH, OFF(osc.root_directory), 0, 0 },
        { "osc.replacedUnits", KEY_UNIT_LIST, OFF(osc.replaced_units), 0, 64 },
        { "osc.driftRepair", KEY_DRIFT_REPAIR, OFF(osc.drift_repair), 0, 0 },
        { "osc.driftInterval", KEY_DURATION, OFF(osc.drift_interval_usec), USEC_PER_SEC, 24 * HOUR },
        SEC("kubelet"),
        { "kubelet.binaryPath", KEY_PATH, OFF(kubelet.binary_path), 0, 0 },
        { "kubelet.unit", KEY_UNIT, OFF(kubelet.unit), 0, 0 },
        { "kubelet.healthzURL", KEY_URL, OFF(kubelet.healthz_url), 0, 0 },
        { "kubelet.healthTimeout", KEY_DURATION, OFF(kubelet.health_timeout_usec), USEC_PER_SEC, 24 * HOUR },
        { "kubelet.keepVersions", KEY_UINT, OFF(kubelet.keep_versions), 2, 64 },
        SEC("osUpdate"),
        { "osUpdate.backend", KEY_BACKEND, OFF(os_update.backend), 0, 0 },
        { "osUpdate.timeout", KEY_DURATION, OFF(os_update.timeout_usec), USEC_PER_SEC, 24 * HOUR },
        { "osUpdate.minVersionForUpdate", KEY_STRING, OFF(os_update.min_version_for_update), 0, 0 },
        SEC("osUpdate.image"),
        { "osUpdate.image.reference", KEY_STRING, OFF(os_update.image.reference), 0, 0 },
        { "osUpdate.image.installDirectory", KEY_PATH, OFF(os_update.image.install_directory), 0, 0 },
        { "osUpdate.image.namePrefix", KEY_DNS_LABEL, OFF(os_update.image.name_prefix), 0, 0 },
        { "osUpdate.image.bootTries", KEY_UINT, OFF(os_update.image.boot_tries), 1, 99 },
        { "osUpdate.reboot", KEY_REBOOT, OFF(os_update.reboot), 0, 0 },
        SEC("registry"),
        { "registry.caFile", KEY_PATH_OPT, OFF(registry.ca_file), 0, 0 },
        { "registry.authFile", KEY_PATH_OPT, OFF(registry.auth_file), 0, 0 },
        { "registry.mirrors", KEY_MIRRORS, 0, 0, 0 },
        SEC("restart"),
        { "restart.selfUnit", KEY_UNIT, OFF(restart.self_unit), 0, 0 },
        SEC("systemd"),
        { "systemd.jobTimeout", KEY_DURATION, OFF(systemd.job_timeout_usec), USEC_PER_SEC, HOUR },
        { "systemd.unitDirectory", KEY_PATH, OFF(systemd.unit_directory), 0, 0 },
        { "systemd.runtimeUnitDirectory", KEY_PATH, OFF(systemd.runtime_unit_directory), 0, 0 },
        SEC("lease"),
        { "lease.enabled", KEY_BOOL, OFF(lease.enabled), 0, 0 },
        { "lease.namespace", KEY_DNS_LABEL, OFF(lease.namespace), 0, 0 },
        { "lease.name", KEY_DNS_NAME, OFF(lease.name), 0, 0 },
        { "lease.duration", KEY_DURATION, OFF(lease.duration_usec), 4 * USEC_PER_SEC, HOUR },
        SEC("console"),
        { "console.enabled", KEY_BOOL, OFF(console.enabled), 0, 0 },
        { "console.path", KEY_PATH_OPT, OFF(console.path), 0, 0 },
};

static const char *const backend_names[_OS_UPDATE_BACKEND_MAX] = {
        [OS_UPDATE_BACKEND_COMMAND] = "command",
        [OS_UPDATE_BACKEND_IMAGE] = "image",
};

static const char *const reboot_names[_REBOOT_METHOD_MAX] = {
        [REBOOT_METHOD_LOGIN1] = "login1",
        [REBOOT_METHOD_SYSTEMD] = "systemd",
        [REBOOT_METHOD_NONE] = "none",
};

DEFINE_STRING_TABLE_LOOKUP(os_update_backend, OsUpdateBackend, backend_names);
static const char *const drift_repair_names[_DRIFT_REPAIR_MAX] = {
        [DRIFT_REPAIR_REPAIR] = "repair",
        [DRIFT_REPAIR_WARN] = "warn",
};

DEFINE_STRING_TABLE_LOOKUP(reboot_method, RebootMethod, reboot_names);
DEFINE_STRING_TABLE_LOOKUP(drift_repair_mode, DriftRepairMode, drift_repair_names);

static const struct {
        size_t offset;
        const char *value;
} string_defaults[] = {
        { OFF(node_name), "" },
        { OFF(kubeconfig), "/var/lib/inplace-agent/kubeconfig" },
        { OFF(bootstrap_kubeconfig), "" },
        { OFF(state_directory), "/var/lib/inplace-agent" },
        { OFF(os_release), "/etc/os-release" },
        { OFF(osc.namespace), "kube-system" },
        { OFF(osc.secret_name), "" },
        { OFF(osc.root_directory), "/" },
        { OFF(systemd.unit_directory), "/etc/systemd/system" },
        { OFF(systemd.runtime_unit_directory), "/run/systemd/system" },
        { OFF(kubelet.binary_path), "/opt/bin/kubelet" },
        { OFF(kubelet.unit), "kubelet.service" },
        { OFF(kubelet.healthz_url), "http://127.0.0.1:10248/healthz" },
        { OFF(os_update.image.reference), "" },
        { OFF(os_update.min_version_for_update), "" },
        { OFF(os_update.image.install_directory), "/boot/efi/EFI/Linux" },
        { OFF(os_update.image.name_prefix), "os" },
        { OFF(registry.ca_file), "" },
        { OFF(registry.auth_file), "" },
        { OFF(restart.self_unit), "inplace-agent.service" },
        { OFF(lease.namespace), "kube-system" },
        { OFF(lease.name), "" },
        { OFF(console.path), "" },
};

static char **string_field(Config *c, size_t offset) {
        return (char **) ((uint8_t *) c + offset);
}

int config_new(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(string_defaults); i++) {
                char **f = string_field(c, string_defaults[i].offset);
                *f = strdup(string_defaults[i].value);
                if (!*f)
                        return -ENOMEM;
        }
        c->kubelet.health_timeout_usec = 5 * MINUTE;
        c->kubelet.keep_versions = 2;
        c->os_update.backend = OS_UPDATE_BACKEND_COMMAND;
        c->os_update.timeout_usec = 10 * MINUTE;
        c->os_update.image.boot_tries = 3;
        c->os_update.reboot = REBOOT_METHOD_LOGIN1;
        c->systemd.job_timeout_usec = 90 * USEC_PER_SEC;
        c->osc.replaced_units = calloc(2, sizeof(char *));
        if (!c->osc.replaced_units || !(c->osc.replaced_units[0] = strdup("gardener-node-agent.service")))
                return -ENOMEM;
        c->osc.drift_repair = DRIFT_REPAIR_REPAIR;
        c->osc.drift_interval_usec = 10 * MINUTE;
        c->lease.enabled = true;
        c->lease.duration_usec = 40 * USEC_PER_SEC;
        c->console.enabled = true;

        *ret = TAKE_PTR(c);
        return 0;
}

static void mirrors_clear(Config *c) {
        for (size_t i = 0; i < c->registry.n_mirrors; i++) {
                free(c->registry.mirrors[i].host);
                free(c->registry.mirrors[i].url);
        }
        free(c->registry.mirrors);
        c->registry.mirrors = NULL;
        c->registry.n_mirrors = 0;
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(string_defaults); i++)
                free(*string_field(c, string_defaults[i].offset));
        mirrors_clear(c);
        strv_freep(&c->osc.replaced_units);
        free(c->config_directory);
        free(c->path);
        free(c);
        return NULL;
}

int config_errorf(char **ret_error, const char *source, const char *key, const char *fmt, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;

        if (!ret_error)
                return -EINVAL;
        va_start(ap, fmt);
        if (vasprintf(&reason, fmt, ap) < 0)
                reason = NULL;
        va_end(ap);
        if (asprintf(ret_error, "%s: %s%s%s", source, strempty(key), key ? ": " : "",
                     reason ? reason : "invalid value") < 0)
                *ret_error = NULL;
        return -EINVAL;
}

static int apply_mirrors(Config *c, const json_t *v, const char *source, const char *key, char **ret_error) {
        const char *host;
        json_t *url;

        if (!json_is_object(v))
                return config_errorf(ret_error, source, key,
                                     "expected a map of registry host to mirror URL");
        /* A later file's mirrors replace the earlier set as a whole, like any other key. */
        mirrors_clear(c);
        c->registry.mirrors = calloc(json_object_size(v) + 1, sizeof(RegistryMirror));
        if (!c->registry.mirrors)
                return -ENOMEM;
        json_object_foreach((json_t *) v, host, url) {
                RegistryMirror *m = &c->registry.mirrors[c->registry.n_mirrors];
                const char *u = json_string_value(url);

                if (!u || (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0))
                        return config_errorf(ret_error, source, key,
                                             "mirror for \"%s\" must be an http:// or https:// URL", host);
                m->host = strdup(host);
                m->url = strdup(u);
                if (!m->host || !m->url)
                        return -ENOMEM;
                c->registry.n_mirrors++;
        }
        return 0;
}

/* A list of unit names; a later file's list replaces the earlier one as a whole. */
static int apply_unit_list(char ***field, const KeyDef *k, const json_t *v, const char *source,
                           char **ret_error) {
        _cleanup_strv_free_ char **l = NULL;
        const json_t *e;
        size_t i;

        if (!json_is_array(v))
                return config_errorf(ret_error, source, k->path, "expected a list of unit names");
        if (json_array_size(v) > k->max)
                return config_errorf(ret_error, source, k->path, "more than %llu entries",
                                     (unsigned long long) k->max);
        l = calloc(json_array_size(v) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(v, i, e) {
                const char *why = NULL;
                int r;

                if (!json_is_string(e))
                        return config_errorf(ret_error, source, k->path, "entry %zu: expected a string", i);
                r = unit_name_normalize(json_string_value(e), &l[i], &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return config_errorf(ret_error, source, k->path, "\"%s\" is not a unit name: %s",
                                             json_string_value(e), why);
        }
        strv_freep(field);
        *field = TAKE_PTR(l);
        return 0;
}

static int apply_key(Config *c, const KeyDef *k, const json_t *v, const char *source, char **ret_error) {
        void *field = (uint8_t *) c + k->offset;
        const char *s = json_string_value(v);
        const char *why = NULL;
        uint64_t u;
        int r;

        switch (k->type) {
        case KEY_BOOL:
                if (!json_is_boolean(v))
                        return config_errorf(ret_error, source, k->path, "expected true or false");
                *(bool *) field = json_is_true(v);
                return 0;
        case KEY_UINT:
                if (!json_is_integer(v))
                        return config_errorf(ret_error, source, k->path, "expected an integer");
                if (json_integer_value(v) < (json_int_t) k->min ||
                    json_integer_value(v) > (json_int_t) k->max)
                        return config_errorf(ret_error, source, k->path, "%lld is out of range %llu..%llu",
                                             (long long) json_integer_value(v), (unsigned long long) k->min,
                                             (unsigned long long) k->max);
                *(unsigned *) field = (unsigned) json_integer_value(v);
                return 0;
        case KEY_MIRRORS:
                return apply_mirrors(c, v, source, k->path, ret_error);
        case KEY_UNIT_LIST:
                return apply_unit_list((char ***) field, k, v, source, ret_error);
        default:
                break;
        }

        if (!s)
                return config_errorf(ret_error, source, k->path, "expected a string");

        switch (k->type) {
        case KEY_DURATION: {
                char lo[DURATION_MAX_STR], hi[DURATION_MAX_STR];

                r = parse_duration(s, &u);
                if (r < 0)
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not a duration (use e.g. 90s, 5m, 1h30m)", s);
                if (u < k->min || u > k->max)
                        return config_errorf(ret_error, source, k->path, "\"%s\" is out of range %s..%s", s,
                                             format_duration(lo, sizeof(lo), k->min),
                                             format_duration(hi, sizeof(hi), k->max));
                *(uint64_t *) field = u;
                return 0;
        }
        case KEY_BACKEND:
                r = os_update_backend_from_string(s);
                if (r < 0)
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not one of command, image", s);
                *(OsUpdateBackend *) field = r;
                return 0;
        case KEY_REBOOT:
                r = reboot_method_from_string(s);
                if (r < 0)
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not one of login1, systemd, none", s);
                *(RebootMethod *) field = r;
                return 0;
        case KEY_DRIFT_REPAIR:
                r = drift_repair_mode_from_string(s);
                if (r < 0)
                        return config_errorf(ret_error, source, k->path, "\"%s\" is not one of repair, warn",
                                             s);
                *(DriftRepairMode *) field = r;
                return 0;
        case KEY_PATH:
        case KEY_PATH_OPT:
                if (!(k->type == KEY_PATH_OPT && *s == '\0') && s[0] != '/')
                        return config_errorf(ret_error, source, k->path, "\"%s\" is not an absolute path",
                                             s);
                if (strlen(s) >= PATH_MAX)
                        return config_errorf(ret_error, source, k->path, "path too long");
                break;
        case KEY_URL:
                if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not an http:// or https:// URL", s);
                break;
        case KEY_DNS_NAME:
                if (*s && !kube_name_is_valid(s, KUBE_NAME_SUBDOMAIN))
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not a lower-case DNS name (RFC 1123): %s", s,
                                             kube_name_invalid_reason(s, KUBE_NAME_SUBDOMAIN));
                break;
        case KEY_DNS_LABEL:
                if (!kube_name_is_valid(s, KUBE_NAME_LABEL))
                        return config_errorf(ret_error, source, k->path,
                                             "\"%s\" is not a lower-case DNS label (RFC 1123): %s", s,
                                             kube_name_invalid_reason(s, KUBE_NAME_LABEL));
                break;
        case KEY_UNIT: {
                _cleanup_free_ char *norm = NULL;

                r = unit_name_normalize(s, &norm, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return config_errorf(ret_error, source, k->path, "\"%s\" is not a unit name: %s", s,
                                             why);
                free(*(char **) field);
                *(char **) field = TAKE_PTR(norm);
                return 0;
        }
        default:
                break;
        }

        return free_and_strdup((char **) field, s);
}

static const KeyDef *find_key(const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (streq(keys[i].path, path))
                        return &keys[i];
        return NULL;
}

static int apply_object(Config *c, const json_t *obj, const char *prefix, const char *source,
                        char **ret_error) {
        const char *name;
        json_t *v;

        json_object_foreach((json_t *) obj, name, v) {
                _cleanup_free_ char *path = NULL;
                const KeyDef *k;
                int r;

                if (asprintf(&path, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name) < 0)
                        return -ENOMEM;
                k = find_key(path);
                if (!k)
                        return config_errorf(ret_error, source, path, "unknown key");
                if (json_is_null(v))
                        continue; /* "key:" with no value means "keep the default" */
                if (k->type == KEY_SECTION) {
                        if (!json_is_object(v))
                                return config_errorf(ret_error, source, path, "expected a map");
                        r = apply_object(c, v, path, source, ret_error);
                } else
                        r = apply_key(c, k, v, source, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_apply_json(Config *c, const json_t *doc, const char *source, char **ret_error) {
        assert(c);
        assert(source);

        if (json_is_null(doc))
                return 0; /* an empty file changes nothing */
        if (!json_is_object(doc))
                return config_errorf(ret_error, source, NULL, "the top level must be a map");
        return apply_object(c, doc, NULL, source, ret_error);
}

int config_finalize(Config *c, const ConfigOverrides *o, char **ret_error) {
        int r;

        assert(c);
        assert(o);

        if (!isempty(o->node_name)) {
                if (!kube_name_is_valid(o->node_name, KUBE_NAME_SUBDOMAIN))
                        return config_errorf(ret_error, o->node_name_source, NULL,
                                             "\"%s\" is not a lower-case DNS name (RFC 1123): %s",
                                             o->node_name,
                                             kube_name_invalid_reason(o->node_name, KUBE_NAME_SUBDOMAIN));
                r = free_and_strdup(&c->node_name, o->node_name);
                if (r < 0)
                        return r;
        }
        if (isempty(c->node_name)) {
                if (isempty(o->hostname))
                        return config_errorf(ret_error, "hostname", NULL, "cannot determine node name");
                r = free_and_strdup(&c->node_name, o->hostname);
                if (r < 0)
                        return r;
                for (char *p = c->node_name; *p; p++)
                        *p = (char) tolower((unsigned char) *p);
                /* It names the Node in every API path: a hostname like "my_host" must stop us here. */
                if (!kube_name_is_valid(c->node_name, KUBE_NAME_SUBDOMAIN))
                        return config_errorf(
                                ret_error, "hostname", "nodeName",
                                "the hostname \"%s\" is not a lower-case DNS name (RFC 1123): %s; "
                                "set nodeName",
                                c->node_name, kube_name_invalid_reason(c->node_name, KUBE_NAME_SUBDOMAIN));
        }
        if (!isempty(o->kubeconfig)) {
                r = free_and_strdup(&c->kubeconfig, o->kubeconfig);
                if (r < 0)
                        return r;
        }
        /* Even an empty $PATH is the agent's, as systemd set it. */
        if (o->path) {
                r = free_and_strdup(&c->path, o->path);
                if (r < 0)
                        return r;
        }
        if (!isempty(o->state_dir)) {
                if (o->state_dir[0] != '/')
                        return config_errorf(ret_error, "--state-dir", NULL,
                                             "\"%s\" is not an absolute path", o->state_dir);
                r = free_and_strdup(&c->state_directory, o->state_dir);
                if (r < 0)
                        return r;
        }
        if (isempty(c->bootstrap_kubeconfig)) {
                free(c->bootstrap_kubeconfig);
                if (asprintf(&c->bootstrap_kubeconfig, "%s/bootstrap-kubeconfig", c->state_directory) < 0) {
                        c->bootstrap_kubeconfig = NULL;
                        return -ENOMEM;
                }
        }
        if (isempty(c->lease.name)) {
                free(c->lease.name);
                if (asprintf(&c->lease.name, "gardener-node-agent-%s", c->node_name) < 0) {
                        c->lease.name = NULL;
                        return -ENOMEM;
                }
                /* A node name of 234+ characters makes the default longer than a name can be. */
                if (!kube_name_is_valid(c->lease.name, KUBE_NAME_SUBDOMAIN))
                        return config_errorf(
                                ret_error, "configuration", "lease.name",
                                "the default \"gardener-node-agent-<nodeName>\" is not a valid name: %s; "
                                "set lease.name",
                                kube_name_invalid_reason(c->lease.name, KUBE_NAME_SUBDOMAIN));
        }
        if (c->os_update.backend == OS_UPDATE_BACKEND_IMAGE && isempty(c->os_update.image.reference))
                return config_errorf(ret_error, "configuration", "osUpdate.image.reference",
                                     "required when osUpdate.backend is \"image\"");
        return 0;
}

static json_t *duration_json(uint64_t usec) {
        char buf[DURATION_MAX_STR];
        return json_string(format_duration(buf, sizeof(buf), usec));
}

json_t *config_to_json(const Config *c) {
        json_t *mirrors = json_object(), *replaced = json_array();

        if (!mirrors || !replaced) {
                json_decref(mirrors);
                json_decref(replaced);
                return NULL;
        }
        for (char **u = c->osc.replaced_units; u && *u; u++)
                json_array_append_new(replaced, json_string(*u));
        for (size_t i = 0; i < c->registry.n_mirrors; i++)
                json_object_set_new(mirrors, c->registry.mirrors[i].host,
                                    json_string(c->registry.mirrors[i].url));

        return json_pack(
                "{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:o, s:s, s:o}, s:{s:s, s:s, s:s, s:o, s:I},"
                " s:{s:s, s:o, s:s, s:{s:s, s:s, s:s, s:I}, s:s},"
                " s:{s:s, s:s, s:o}, s:{s:s}, s:{s:o, s:s, s:s}, s:{s:b, s:s, s:s, s:o}, s:{s:b, s:s}}",
                "nodeName", strempty(c->node_name), "kubeconfig", c->kubeconfig, "bootstrapKubeconfig",
                strempty(c->bootstrap_kubeconfig), "stateDirectory", c->state_directory, "osRelease",
                c->os_release, "osc", "namespace", c->osc.namespace, "secretName", c->osc.secret_name,
                "rootDirectory", c->osc.root_directory, "replacedUnits", replaced, "driftRepair",
                drift_repair_mode_to_string(c->osc.drift_repair), "driftInterval",
                duration_json(c->osc.drift_interval_usec), "kubelet", "binaryPath", c->kubelet.binary_path,
                "unit", c->kubelet.unit, "healthzURL", c->kubelet.healthz_url, "healthTimeout",
                duration_json(c->kubelet.health_timeout_usec), "keepVersions",
                (json_int_t) c->kubelet.keep_versions, "osUpdate", "backend",
                os_update_backend_to_string(c->os_update.backend), "timeout",
                duration_json(c->os_update.timeout_usec), "minVersionForUpdate",
                c->os_update.min_version_for_update, "image", "reference", c->os_update.image.reference,
                "installDirectory", c->os_update.image.install_directory, "namePrefix",
                c->os_update.image.name_prefix, "bootTries", (json_int_t) c->os_update.image.boot_tries,
                "reboot", reboot_method_to_string(c->os_update.reboot), "registry", "caFile",
                c->registry.ca_file, "authFile", c->registry.auth_file, "mirrors", mirrors, "restart",
                "selfUnit", c->restart.self_unit, "systemd", "jobTimeout",
                duration_json(c->systemd.job_timeout_usec), "unitDirectory", c->systemd.unit_directory,
                "runtimeUnitDirectory", c->systemd.runtime_unit_directory, "lease", "enabled",
                c->lease.enabled, "namespace", c->lease.namespace, "name", c->lease.name, "duration",
                duration_json(c->lease.duration_usec), "console", "enabled", c->console.enabled, "path",
                c->console.path);
}
