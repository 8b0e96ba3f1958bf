#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Credentials and TLS of the Kubernetes client (docs/kube-api.md §2, §10 faults 11 and 12): a server certificate
that does not verify is refused and never talked to (no insecure fallback exists), retried with backoff until
it is fixed; a rotated token file and rotated client certificate files are picked up without a restart."""

import collections
import os
import shutil
import time

from lib import itest
from lib.itest import check, eq
import agentrun
from agentrun import Agent, node_requests
from kubeemu import wait_for


def tls_log(emu, since_time, cert=None, client_auth=None):
    """Handshakes since since_time; with cert or client_auth, only those under that server configuration (one
    begun before a switch may end after it)."""
    return [e for e in emu.connections()["tls"] if e["time"] >= since_time and
            (cert is None or e["mode"][0] == cert) and (client_auth is None or e["mode"][1] == client_auth)]


def attempts_in_window(emu, since_time, window, **mode):
    """The agent's connection attempts under a server configuration (cert, client_auth), in `window` seconds from
    the first of them after since_time. The first is waited for with a deadline (a watch being opened at the switch may still be served under
    the old configuration); the window that follows is a measurement of the backoff, not a wait."""
    first = wait_for(lambda: tls_log(emu, since_time, **mode), 15, "a connection attempt under %s" % mode)
    t1 = first[0]["time"]
    time.sleep(max(0.0, t1 + window - time.time()))
    return [e for e in tls_log(emu, t1, **mode) if e["time"] < t1 + window]


# The agent's retrying loops: its Node watch, its OSC Secret watch and its Lease, each backing off from 0.2 s
# (doubling, jitter on top). Counted from its first attempt, one loop makes at most 4 attempts in 3 s and 5 in
# 4 s; a loop without backoff would make hundreds.
RETRY_LOOPS = 3


def most_attempts(window):
    n, t, d = 1, 0.0, 0.2
    while t + d < window:
        t, d, n = t + d, 2 * d, n + 1
    return RETRY_LOOPS * n


def requests_on(emu, since, cert="good", client_auth="optional"):
    """Requests received on connections whose handshake used this server configuration. Time or sequence
    cannot tell them apart: a watch opened before a switch is logged when it arrives and ends after it."""
    return [e for e in emu.request_log(since=since) if e["tls"] == [cert, client_auth]]


def check_tls_refused(emu, mode, node):
    """Switch the server certificate to `mode`; the agent must not send a single request until it is good."""
    with Agent(emu, node) as agent:
        agent.wait_settled()
        agent.wait_watching(timeout=5)
        since = agentrun.last_seq(emu)
        t0 = time.time()
        emu.tls(cert=mode)                      # drops the open connections too
        emu.label_node(node, {"during": mode})
        # With a wrong CA the client aborts inside the handshake; a wrong name is checked by libcurl right
        # after it, so the server may log those handshakes as complete. Either way: not one request.
        attempts = attempts_in_window(emu, t0, 4, cert=mode)
        print("    %s: %d connection attempts in 4 s, all refused" % (mode, len(attempts)))
        check(len(attempts) <= most_attempts(4), "%d handshakes in 4 s: backoff from 0.2 s expected", len(attempts))
        attempts = tls_log(emu, t0, cert=mode)
        if mode == "wrong-ca":
            eq([e for e in attempts if e["ok"]], [], "handshakes completed with an unknown CA")
        eq(requests_on(emu, since, cert=mode), [], "requests sent to a server with a bad certificate")
        check("Key was rejected" in agent.log(), "verification failure (-EKEYREJECTED) in the log")
        check(agent.labels().get("during") != mode, "no data read from the bad server")
        emu.tls(cert="good")
        agent.wait_label("during", mode, 15)


def write_cert_kubeconfig(emu, path, cert, key):
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                "clusters:\n- name: k\n  cluster:\n    server: %s\n    certificate-authority: %s\n"
                "users:\n- name: u\n  user:\n    client-certificate: client.crt\n    client-key: client.key\n"
                "contexts:\n- name: c\n  context: {cluster: k, user: u}\n" % (emu.server, emu.ca))


def replace(src, dst):
    tmp = dst + ".tmp"
    shutil.copyfile(src, tmp)
    os.rename(tmp, dst)


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeAuth(itest.EmulatorTest):
    def test_1_wrong_ca_is_refused(self):
        emu = self.emu
        emu.seed_node("a1")
        check_tls_refused(emu, "wrong-ca", "a1")

    def test_2_wrong_san_is_refused(self):
        emu = self.emu
        emu.seed_node("a2")
        check_tls_refused(emu, "wrong-san", "a2")

    def test_3_expired_server_cert_is_refused(self):
        emu = self.emu
        emu.seed_node("a3")
        check_tls_refused(emu, "expired", "a3")

    def test_4_server_demanding_client_cert(self):
        """Fault 11: the server starts requiring a client certificate the agent (token auth) does not have:
        handshakes fail, retried with backoff, no request; recovers when the server relents."""
        emu = self.emu
        emu.seed_node("a7")
        with Agent(emu, "a7") as agent:
            agent.wait_settled()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            t0 = time.time()
            emu.tls(client_auth="required")
            emu.label_node("a7", {"mtls": "1"})
            attempts = attempts_in_window(emu, t0, 3, client_auth="required")
            eq([e for e in attempts if e["ok"]], [], "handshakes completed without a client certificate")
            print("    client certificate required: %d failed handshakes in 3 s" % len(attempts))
            check(len(attempts) <= most_attempts(3), "%d handshakes in 3 s: backoff from 0.2 s expected", len(attempts))
            eq(requests_on(emu, since, client_auth="required"), [], "requests without the required client certificate")
            emu.tls(client_auth="optional")
            agent.wait_label("mtls", "1", 15)

    def test_5_token_file_rotated_mid_watch(self):
        """Fault 12: the token in tokenFile is replaced and the old one revoked while a watch runs. The running
        watch keeps streaming (authentication is per request); the next request fails 401 once at most, the file
        is re-read, and everything continues as the new identity — without a restart."""
        emu = self.emu
        emu.seed_node("a4")
        old = "old-token-a4"
        new = "new-token-a4"
        emu.add_token(old, "old-user", ["system:masters"])
        emu.add_token(new, "rotated-user", ["system:masters"])
        emu.write_token_file(old)
        with Agent(emu, "a4", tuning={"token-refresh": "50s"}) as agent:
            agent.wait_settled()
            agent.wait_watching(timeout=5)
            check(all(e["user"] == "old-user" for e in node_requests(emu, "a4")), "started as old-user")
            since = agentrun.last_seq(emu)
            emu.write_token_file(new)
            emu.revoke_token(old)
            emu.label_node("a4", {"mid": "1"})       # still delivered on the running watch
            agent.wait_label("mid", "1", 5)
            reqs = wait_for(lambda: [e for e in node_requests(emu, "a4", since) if e["user"] == "rotated-user"], 15,
                            "a request as the rotated identity")
            # Once at most per request: those already on their way when the token was revoked (the
            # Node watch's LIST, a Lease renewal, an Event: more of them when the agent runs slowly under
            # ASan) each meet one 401; none fails twice (a retry with the old token would).
            unauthorized = [e for e in emu.request_log(since=since) if e["status"] == 401]
            per_request = collections.Counter((e["verb"], e["path"]) for e in unauthorized)
            check(all(n == 1 for n in per_request.values()), "a request failed with 401 twice: %s", per_request)
            emu.label_node("a4", {"after": "1"})
            agent.wait_label("after", "1", 10)
            check(reqs[0]["user"] == "rotated-user", "new identity")
            check(agent.alive(), "no restart")

    def test_6_expired_token_until_file_rewritten(self):
        """Fault 12: the token becomes invalid and the file still holds it → 401s with backoff, no crash; once
        the file is rewritten, the agent recovers at its next attempt."""
        emu = self.emu
        emu.seed_node("a5")
        tok = "short-token-a5"
        emu.add_token(tok, "short-user", ["system:masters"])
        emu.write_token_file(tok)
        with Agent(emu, "a5") as agent:
            agent.wait_settled()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.revoke_token(tok)
            emu.close_connections(watches="clean")
            wait_for(lambda: [e for e in emu.request_log(since=since) if e["status"] == 401], 10, "a 401")
            time.sleep(3)
            n401 = len([e for e in emu.request_log(since=since) if e["status"] == 401])
            check(n401 <= 10, "%d requests with a revoked token in ~3 s", n401)
            good = "fresh-token-a5"
            emu.add_token(good, "fresh-user", ["system:masters"])
            emu.write_token_file(good)
            emu.label_node("a5", {"fresh": "1"})
            agent.wait_label("fresh", "1", 15)

    def test_7_client_certificate_rotated(self):
        """Fault 12: kubelet-style rotation of the client certificate files: picked up within the check period
        (1 s here), the watch moves to a connection with the new certificate, no restart."""
        emu = self.emu
        emu.seed_node("a6")
        first = emu.make_client_cert("a6-first", "cert-user-1", ["system:masters"])
        second = emu.make_client_cert("a6-second", "cert-user-2", ["system:masters"])
        with Agent(emu, "a6", start=False) as agent:
            kc = os.path.join(agent.dir, "kubeconfig")
            replace(first["cert"], os.path.join(agent.dir, "client.crt"))
            replace(first["key"], os.path.join(agent.dir, "client.key"))
            write_cert_kubeconfig(emu, kc, "client.crt", "client.key")   # relative paths, resolved by the agent
            with open(agent.config_path) as f:
                cfg = f.read().replace(agent.kubeconfig, kc)
            with open(agent.config_path, "w") as f:
                f.write(cfg)
            agent.start()
            agent.wait_settled()
            agent.wait_watching(timeout=5)
            check(all(e["user"] == "cert-user-1" for e in node_requests(emu, "a6")), "started as cert-user-1")
            since = agentrun.last_seq(emu)
            replace(second["key"], os.path.join(agent.dir, "client.key"))
            replace(second["cert"], os.path.join(agent.dir, "client.crt"))
            watch = wait_for(lambda: [e for e in node_requests(emu, "a6", since)
                                      if e["verb"] == "watch" and e["user"] == "cert-user-2"], 10,
                             "a watch with the new certificate")[0]
            check(watch["time"] - time.time() < 10, "picked up")
            emu.label_node("a6", {"rotated": "1"})
            agent.wait_label("rotated", "1", 10)
            check("credentials changed" in agent.log(), "the agent noticed the rotation")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
