/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's configuration (docs/contract.md §3): /etc/inplace-agent/config.yaml plus config.d/<name>.yaml
 * drop-ins in lexical order, later keys winning. Pure: decoding and defaults only;
 * daemon/config-files reads the files and the environment. The resulting Config is immutable once
 * config_finalize() ran. Does not log: errors come back as -errno plus a message naming file, key and
 * reason. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "build-config.h"
#include "util/macro.h"

#define CONFIG_DEFAULT_PATH SYSCONFDIR "/inplace-agent/config.yaml"

typedef enum OsUpdateBackend {
        OS_UPDATE_BACKEND_COMMAND,
        OS_UPDATE_BACKEND_IMAGE,
        _OS_UPDATE_BACKEND_MAX,
        _OS_UPDATE_BACKEND_INVALID = -EINVAL,
} OsUpdateBackend;

typedef enum RebootMethod {
        REBOOT_METHOD_LOGIN1,
        REBOOT_METHOD_SYSTEMD,
        REBOOT_METHOD_NONE,
        _REBOOT_METHOD_MAX,
        _REBOOT_METHOD_INVALID = -EINVAL,
} RebootMethod;

/* osc.driftRepair: what the drift check does about what it finds (duties/drift-repair.h). */
typedef enum DriftRepairMode {
        DRIFT_REPAIR_REPAIR, /* restore it as an apply would, then one Warning Event */
        DRIFT_REPAIR_WARN,   /* one Warning Event, nothing touched */
        _DRIFT_REPAIR_MAX,
        _DRIFT_REPAIR_INVALID = -EINVAL,
} DriftRepairMode;

typedef struct RegistryMirror {
        char *host; /* owned: upstream registry host, e.g. "registry.example.com" */
        char *url;  /* owned: mirror base URL, e.g. "https://mirror.local:5000" */
} RegistryMirror;

typedef struct Config {
        char *node_name;            /* owned */
        char *kubeconfig;           /* owned */
        char *bootstrap_kubeconfig; /* owned; "" until finalized = <stateDirectory>/bootstrap-kubeconfig */
        char *state_directory;      /* owned */
        char *os_release;           /* owned */
        char *config_directory;     /* owned; where the configuration files were read (not a key:
                                     * set by daemon/config-files); NULL if none were */
        char *path;                 /* owned; the agent's $PATH (not a key: set from the environment
                                     * at start), written into containerd's drop-in; NULL if unset */

        struct {
                char *namespace;       /* owned */
                char *secret_name;     /* owned; "" = from the Node label */
                char *root_directory;  /* owned; OSC paths are resolved below it (docs/contract.md §9.5) */
                char **replaced_units; /* owned strv; never written or started (docs/contract.md §9.4) */
                DriftRepairMode drift_repair;
                uint64_t drift_interval_usec; /* between drift checks (jittered); the first at start */
        } osc;

        struct {
                char *binary_path; /* owned */
                char *unit;        /* owned */
                char *healthz_url; /* owned */
                uint64_t health_timeout_usec;
                unsigned keep_versions;
        } kubelet;

        struct {
                OsUpdateBackend backend;
                uint64_t timeout_usec;
                char *min_version_for_update; /* owned; "" = none (the last source of docs/contract.md §9.10)
                                               */
                struct {
                        char *reference;         /* owned; may contain "{version}" */
                        char *install_directory; /* owned */
                        char *name_prefix;       /* owned */
                        unsigned boot_tries;
                } image;
                RebootMethod reboot;
        } os_update;

        struct {
                char *ca_file;           /* owned */
                char *auth_file;         /* owned */
                RegistryMirror *mirrors; /* owned array */
                size_t n_mirrors;
        } registry;

        struct {
                char *self_unit; /* owned */
        } restart;

        struct {
                uint64_t job_timeout_usec;
                char *unit_directory;         /* owned; unit files and drop-ins of the OSC (not re-rooted) */
                char *runtime_unit_directory; /* owned; the replaced units' drop-ins
                                                 (duties/replaced-units.h) */
        } systemd;

        struct {
                bool enabled;
                char *namespace; /* owned */
                char *name;      /* owned; "" until finalized = gardener-node-agent-<node> */
                uint64_t duration_usec;
        } lease;

        struct {
                bool enabled; /* say what keeps us from the API server on the kernel console */
                char *path;   /* owned; "" = standard output (the unit sends it to the kernel
                               * log), else a file, FIFO or /dev/kmsg the lines are appended to */
        } console;
} Config;

/* A Config holding every default of docs/contract.md §3. */
int config_new(Config **ret);
Config *config_free(Config *c);
DEFINE_CLEANUP_FUNC(Config, config_free);

/* Applies one decoded YAML document on top of *c. `source` names the file in messages.
 * Unknown keys, wrong types, malformed or out-of-range values → -EINVAL with *ret_error set to
 * "<source>: <key>: <reason>". */
int config_apply_json(Config *c, const json_t *doc, const char *source, char **ret_error);

/* "<source>: <key>: <reason>" into *ret_error (when not NULL); returns -EINVAL. */
int config_errorf(char **ret_error, const char *source, const char *key, const char *fmt, ...)
        _printf_(4, 5);

/* What the command line and the environment say, resolved by the caller (daemon/config-files.c);
 * NULL or "" means "not given". */
typedef struct ConfigOverrides {
        const char *node_name;
        const char *node_name_source; /* "--node-name" or "$NODE_NAME", for messages */
        const char *kubeconfig;
        const char *state_dir;
        const char *hostname; /* the fallback node name, lower-cased here */
        const char *path;     /* $PATH */
} ConfigOverrides;

/* Overrides, then derived defaults (nodeName from the hostname, lease.name from the node name). */
int config_finalize(Config *c, const ConfigOverrides *o, char **ret_error);

/* The effective configuration in the YAML/JSON schema of docs/contract.md §3 (durations as "5m"). */
json_t *config_to_json(const Config *c);

const char *os_update_backend_to_string(OsUpdateBackend b);
OsUpdateBackend os_update_backend_from_string(const char *s);
const char *reboot_method_to_string(RebootMethod m);
RebootMethod reboot_method_from_string(const char *s);
const char *drift_repair_mode_to_string(DriftRepairMode m);
DriftRepairMode drift_repair_mode_from_string(const char *s);
