# SPDX-License-Identifier: Apache-2.0
"""The integration tests' library: a test starts with `from lib import itest`, which puts this folder on
sys.path for the rest (kubeemu, agentrun, usermgr, registry, sandbox, gardener, producers)."""
