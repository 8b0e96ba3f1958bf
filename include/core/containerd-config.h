/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* containerd's /etc/containerd/config.toml as the agent writes it (docs/node-protocol.md §6.4 step 5,
 * upstream's ReconcileContainerdConfig), rendered from the OSC's criConfig (the OscModel's
 * containerd_config: {sandboxImage, plugins, cgroupDriver}).
 *
 * Upstream starts from `containerd config default` when the file is missing and edits the TOML it
 * finds. We have no TOML parser and do not want one: the agent owns config.toml entirely and renders
 * the complete file from the OSC alone, so the output is deterministic and writing it again is a
 * no-op (idempotent across retries and SIGKILL). Settings nobody else owns belong in
 * /etc/containerd/conf.d/ (imported: *.toml) or in criConfig.containerd.plugins. The document is
 * `version = 2` (containerd 1.x reads it natively, 2.x migrates it in memory) with what upstream sets:
 *   - imports = [CONTAINERD_CONFIG_IMPORTS];
 *   - plugins."io.containerd.grpc.v1.cri".registry.config_path = "/etc/containerd/certs.d";
 *   - .sandbox_image = spec.criConfig.containerd.sandboxImage (left out when unset or empty);
 *   - .cni.bin_dir = "/opt/cni/bin";
 *   - .containerd.runtimes.runc.options.SystemdCgroup = (spec.criConfig.cgroupDriver == "systemd"),
 *     only when cgroupDriver is set;
 *   - .containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2", which `containerd config
 *     default` also has, so that a partial runc table (the cgroup driver, a plugin) keeps the runtime;
 *   - then criConfig.containerd.plugins in order, below "plugins": op "add" (the default) creates the
 *     table at `path` and merges `values` into it key by key (a key replaces the whole value, as Go's
 *     json.Unmarshal into the map does; null removes the key), op "remove" deletes the subtree.
 * Everything else is containerd's built-in default, which is what `containerd config default`
 * prints (root/state dirs, snapshotter, default runtime name, stream server, ...).
 *
 * Deliberate differences to upstream: JSON integers stay TOML integers (upstream's float64 round
 * trip writes 3 as 3.0); "remove" of a path that does not exist creates no empty tables; keys are
 * written in byte order. Plugin values are bounded and checked: nesting at most
 * CONTAINERD_CONFIG_DEPTH_MAX tables/arrays below the document root, keys 1..CONTAINERD_CONFIG_KEY_MAX
 * bytes without control characters, no null inside arrays. A violation is -EINVAL with a message
 * naming the field ("spec.criConfig.containerd.plugins[2].values.foo: ...").
 *
 * Pure: no I/O, no logging. Returns malloc'ed text the caller owns. */

#include <jansson.h>

#define CONTAINERD_CONFIG_FILE "/etc/containerd/config.toml"
#define CONTAINERD_CONFIG_IMPORTS "/etc/containerd/conf.d/*.toml"
#define CONTAINERD_CERTS_DIR "/etc/containerd/certs.d"
#define CONTAINERD_CNI_BIN_DIR "/opt/cni/bin"
#define CONTAINERD_CONFIG_DEPTH_MAX 16    /* tables and arrays below the document root */
#define CONTAINERD_CONFIG_KEY_MAX 256     /* bytes of one key or path element */
#define CONTAINERD_CONFIG_PLUGINS_MAX 256 /* criConfig.containerd.plugins entries */
#define CONTAINERD_CONFIG_ARRAY_MAX 4096  /* elements of one array in plugin values */

/* Renders config.toml from `config` ({sandboxImage, plugins, cgroupDriver}, all optional; NULL is
 * the empty object). -EINVAL with *ret_error (if not NULL) naming the field, -ENOMEM. */
int containerd_config_render(const json_t *config, char **ret, char **ret_error);
