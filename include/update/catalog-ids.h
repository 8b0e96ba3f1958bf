/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* MESSAGE_IDs of the agent's key journal lines, for log_struct_id(). Pure header: no code.
 * Every ID here has an entry in units/inplace-agent.catalog (installed to the journal catalog
 * directory, shown by `journalctl -x`); tests/integration/test_catalog.py fails the build if
 * either side is missing. The IDs are part of the external contract: never change or reuse one,
 * add a new ID for a new meaning. Generated with python3 -c 'import uuid;print(uuid.uuid4().hex)'.
 *
 * Lines carrying an update ID are logged inside a transaction, so they also carry
 * INPLACE_TRANSACTION= and INPLACE_PHASE= (log_set_transaction()), which the catalog text uses. */

/* Agent lifecycle (no transaction context). */
#define MESSAGE_ID_AGENT_STARTED "72d835c1068e4b87bbdb5da5b367f5ff"
#define MESSAGE_ID_AGENT_STOPPED "4554beda564045029abfe0e05a7b5d3f"
#define MESSAGE_ID_CONFIG_ERROR "b7af27733e5d470ba216ca060fc3e72c"

/* One in-place update transaction, in the order the phases happen. */
#define MESSAGE_ID_UPDATE_PLANNED "97e687d6d0e94779b38bc17a96a57392"
#define MESSAGE_ID_UPDATE_STAGED "d400df2c11494f1f8e8cd0b491777a89"
#define MESSAGE_ID_UPDATE_APPLIED "87e0ce28bb3843e584d0fd0999e71cb9"
#define MESSAGE_ID_UPDATE_SUCCEEDED "661e8ba614404f779a94c46af77d1ac1"
#define MESSAGE_ID_UPDATE_FAILED "75859115eb434176b68cd897aa62dbef"
#define MESSAGE_ID_UPDATE_ROLLED_BACK "4a3cd99fb3a94e628e3b3f87558fc0bb"

/* Unit restarts requested by worker.gardener.cloud/restart-systemd-services or an update. */
#define MESSAGE_ID_UNIT_RESTARTED "77b9a6e19178440eb1acad9f7327aec6"
#define MESSAGE_ID_UNIT_RESTART_FAILED "6821adae9a9a4effb3bba994cd31fc00"
