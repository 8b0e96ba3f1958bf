/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "core/node-view.h"
#include "util/error-message.h"
#include "util/json-util.h"
#include "util/string-util.h"

static const char *const result_names[_NODE_UPDATE_RESULT_MAX] = {
        [NODE_UPDATE_RESULT_NONE] = "none",
        [NODE_UPDATE_RESULT_SUCCESSFUL] = "successful",
        [NODE_UPDATE_RESULT_FAILED] = "failed",
        [NODE_UPDATE_RESULT_INVALID] = "invalid",
};

DEFINE_STRING_TABLE_LOOKUP(node_update_result, NodeUpdateResult, result_names);

static void condition_done(NodeCondition *c) {
        free(c->status);
        free(c->reason);
        free(c->message);
        free(c->last_transition_time);
        *c = (NodeCondition) {};
}

NodeView *node_view_free(NodeView *v) {
        if (!v)
                return NULL;
        free(v->name);
        free(v->uid);
        free(v->resource_version);
        free(v->update_result_value);
        condition_done(&v->in_place_update);
        condition_done(&v->agent);
        condition_done(&v->osc_secret);
        condition_done(&v->units_ready);
        condition_done(&v->ready);
        free(v->restart_services);
        free(v->updating_os_version);
        free(v->applied_checksum);
        free(v->update_failed_reason);
        free(v->progress);
        free(v->plan);
        free(v->failure);
        free(v->secret_name);
        free(v->kubernetes_version);
        free(v->role_worker);
        free(v->role_control_plane);
        free(v->zone);
        free(v->reconciliation_delay);
        free(v->min_version_for_update);
        free(v->internal_ip);
        free(v->warning);
        free(v);
        return NULL;
}

/* Adds to the warning, "; " between parts. */
static int add_warning(NodeView *v, const char *format, ...) _printf_(2, 3);
static int add_warning(NodeView *v, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = strextendv_with_separator(&v->warning, "; ", format, ap);
        va_end(ap);
        return r;
}

static int decode_labels(const json_t *labels, NodeView *v, char **ret_error) {
        _cleanup_free_ char *candidate = NULL, *selected = NULL;
        const struct {
                const char *key;
                char **field;
        } table[] = {
                { NODE_LABEL_CANDIDATE, &candidate },
                { NODE_LABEL_SELECTED, &selected },
                { NODE_LABEL_UPDATE_RESULT, &v->update_result_value },
                { NODE_LABEL_SECRET_NAME, &v->secret_name },
                { NODE_LABEL_KUBERNETES_VERSION, &v->kubernetes_version },
                { NODE_LABEL_ROLE_WORKER, &v->role_worker },
                { NODE_LABEL_ROLE_CONTROL_PLANE, &v->role_control_plane },
                { NODE_LABEL_ZONE, &v->zone },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                int r = json_field_string(labels, "metadata.labels", table[i].key, NODE_LABEL_VALUE_MAX, 0,
                                          table[i].field, ret_error);
                if (r < 0)
                        return r;
        }

        v->candidate = streq_ptr(candidate, "true");
        v->selected = streq_ptr(selected, "true");
        if (!v->update_result_value)
                v->update_result = NODE_UPDATE_RESULT_NONE;
        else if (streq(v->update_result_value, "successful"))
                v->update_result = NODE_UPDATE_RESULT_SUCCESSFUL;
        else if (streq(v->update_result_value, "failed"))
                v->update_result = NODE_UPDATE_RESULT_FAILED;
        else {
                v->update_result = NODE_UPDATE_RESULT_INVALID;
                return add_warning(v,
                                   "label %s has the invalid value \"%s\" (expected successful or failed); "
                                   "treating it as absent",
                                   NODE_LABEL_UPDATE_RESULT, v->update_result_value);
        }
        return 0;
}

static int decode_annotations(const json_t *annotations, NodeView *v, char **ret_error) {
        const struct {
                const char *key;
                char **field;
        } table[] = {
                { NODE_ANNOTATION_RESTART, &v->restart_services },
                { NODE_ANNOTATION_UPDATING_OS, &v->updating_os_version },
                { NODE_ANNOTATION_CHECKSUM, &v->applied_checksum },
                { NODE_ANNOTATION_FAILED_REASON, &v->update_failed_reason },
                { NODE_ANNOTATION_PROGRESS, &v->progress },
                { NODE_ANNOTATION_PLAN, &v->plan },
                { NODE_ANNOTATION_FAILURE, &v->failure },
                { NODE_ANNOTATION_RECONCILE_DELAY, &v->reconciliation_delay },
                { NODE_ANNOTATION_MIN_VERSION, &v->min_version_for_update },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                int r = json_field_string(annotations, "metadata.annotations", table[i].key,
                                          NODE_ANNOTATIONS_MAX, 0, table[i].field, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A string we only show, never decide on: anything else than a clean string is dropped. */
static int get_informational(const json_t *obj, const char *key, char **ret) {
        const json_t *v = json_object_get(obj, key);

        *ret = NULL;
        if (!json_is_string(v) || json_string_length(v) > NODE_ANNOTATIONS_MAX ||
            strlen(json_string_value(v)) != json_string_length(v))
                return 0;
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int decode_condition(const json_t *c, size_t i, NodeCondition *ret, char **ret_error) {
        NodeCondition n = { .present = true };
        const char *where = n.position;
        int r;

        (void) snprintf(n.position, sizeof(n.position), "status.conditions[%zu]", i);
        r = json_field_string(c, where, "reason", NODE_ANNOTATIONS_MAX, 0, &n.reason, ret_error);
        if (r >= 0)
                r = json_field_string(c, where, "lastTransitionTime", NODE_ANNOTATIONS_MAX, 0,
                                      &n.last_transition_time, ret_error);
        if (r >= 0)
                r = get_informational(c, "status", &n.status);
        if (r >= 0)
                r = get_informational(c, "message", &n.message);
        if (r < 0) {
                condition_done(&n);
                return r;
        }
        condition_done(ret);
        *ret = n;
        return 0;
}

/* The type of a condition or address, if it is a clean string (a NUL inside makes it no type of ours). */
static const char *condition_type(const json_t *c) {
        const json_t *type = json_object_get(c, "type");

        if (!json_is_string(type) || strlen(json_string_value(type)) != json_string_length(type))
                return NULL;
        return json_string_value(type);
}

static int decode_conditions(const json_t *node, NodeView *v, char **ret_error) {
        const json_t *status, *conditions, *c;
        size_t i;
        int r;

        r = json_field_object(node, NULL, "status", &status, ret_error);
        if (r >= 0)
                r = json_field_array(status, "status", "conditions", &conditions, ret_error);
        if (r < 0 || !conditions)
                return r;
        if (json_array_size(conditions) > NODE_CONDITIONS_MAX) {
                r = add_warning(v, "status.conditions has %zu entries; only the first %d are looked at",
                                json_array_size(conditions), NODE_CONDITIONS_MAX);
                if (r < 0)
                        return r;
        }

        json_array_foreach(conditions, i, c) {
                NodeCondition *target;
                const char *type;

                if (i >= NODE_CONDITIONS_MAX)
                        break;
                /* Conditions of other types are none of our business, whatever their shape. */
                type = json_is_object(c) ? condition_type(c) : NULL;
                if (streq_ptr(type, NODE_CONDITION_IN_PLACE_UPDATE)) {
                        /* docs/contract.md §9.9: any entry with ReadyForUpdate opens the gate; the last one
                         * is the newest signal (a manual retry appends). Otherwise the first counts. */
                        bool keep = v->in_place_update.present &&
                                !streq_ptr(json_string_value(json_object_get(c, "reason")),
                                           NODE_REASON_READY_FOR_UPDATE);
                        if (keep)
                                continue;
                        r = decode_condition(c, i, &v->in_place_update, ret_error);
                } else if (type && (target = (NodeCondition *) node_view_condition(v, type)) &&
                           !target->present)
                        /* The other conditions we read (ours, SystemdUnitsReady, Ready): the first counts.
                         */
                        r = decode_condition(c, i, target, ret_error);
                else
                        continue;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* status.addresses, leniently (kubelet's to write, ours only to remember; docs/node-protocol.md §8 item 2):
 * entries that are not objects with a clean string type and address are skipped. */
static int decode_addresses(const json_t *node, NodeView *v) {
        const json_t *addresses = json_object_get(json_object_get(node, "status"), "addresses"), *a;
        size_t i;

        json_array_foreach(addresses, i, a) {
                const char *type = json_is_object(a) ? condition_type(a) : NULL;
                _cleanup_free_ char *address = NULL;

                if (get_informational(a, "address", &address) < 0)
                        return -ENOMEM;
                if (!address || strlen(address) > NODE_ADDRESS_MAX)
                        continue;
                if (streq_ptr(type, "ExternalIP"))
                        v->external_ip = true;
                else if (streq_ptr(type, "InternalIP") && !v->internal_ip)
                        v->internal_ip = TAKE_PTR(address);
        }
        return 0;
}

int node_view_decode(const json_t *node, NodeView **ret, char **ret_error) {
        _cleanup_(node_view_freep) NodeView *v = NULL;
        const json_t *meta, *labels, *annotations;
        int r;

        assert(ret);

        if (!json_is_object(node))
                return error_setf(ret_error, -EINVAL, "node: expected an object");
        meta = json_object_get(node, "metadata");
        if (!json_is_object(meta))
                return error_setf(ret_error, -EINVAL, "metadata: expected an object");

        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;

        r = json_field_string(meta, "metadata", "name", NODE_NAME_MAX, 0, &v->name, ret_error);
        if (r < 0)
                return r;
        if (isempty(v->name))
                return error_setf(ret_error, -EINVAL, "metadata.name: missing");
        r = json_field_string(meta, "metadata", "uid", NODE_NAME_MAX, 0, &v->uid, ret_error);
        if (r >= 0)
                r = json_field_string(meta, "metadata", "resourceVersion", NODE_NAME_MAX, 0,
                                      &v->resource_version, ret_error);
        if (r >= 0)
                r = json_field_object(meta, "metadata", "labels", &labels, ret_error);
        if (r >= 0)
                r = json_field_object(meta, "metadata", "annotations", &annotations, ret_error);
        if (r >= 0)
                r = decode_labels(labels, v, ret_error);
        if (r >= 0)
                r = decode_annotations(annotations, v, ret_error);
        if (r >= 0)
                r = decode_conditions(node, v, ret_error);
        if (r >= 0)
                r = decode_addresses(node, v);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(v);
        return 0;
}

const NodeCondition *node_view_condition(const NodeView *v, const char *type) {
        if (!v)
                return NULL;
        if (streq(type, NODE_CONDITION_AGENT))
                return &v->agent;
        if (streq(type, NODE_CONDITION_OSC_SECRET))
                return &v->osc_secret;
        if (streq(type, NODE_CONDITION_UNITS_READY))
                return &v->units_ready;
        if (streq(type, NODE_CONDITION_READY))
                return &v->ready;
        return NULL;
}

bool node_view_ready_for_update(const NodeView *v) {
        return v && v->in_place_update.present &&
                streq_ptr(v->in_place_update.reason, NODE_REASON_READY_FOR_UPDATE);
}

const char *node_view_ready_since(const NodeView *v) {
        if (!node_view_ready_for_update(v))
                return NULL;
        if (v->in_place_update.last_transition_time)
                return v->in_place_update.last_transition_time;
        return isempty(v->in_place_update.position) ? NULL : v->in_place_update.position;
}

bool node_view_gate_open(const NodeView *v) {
        return v && (node_view_ready_for_update(v) || v->update_result == NODE_UPDATE_RESULT_FAILED);
}

bool node_view_became_ready(const NodeView *old, const NodeView *new) {
        return node_view_ready_for_update(new) && !node_view_ready_for_update(old);
}
