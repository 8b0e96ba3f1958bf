"""The emulator's runtime configuration: every knob a test may turn while the emulator runs.

Owns: DEFAULT_CONFIG (each key with its default and meaning), Config (type-checked updates from
``--config KEY=VALUE`` or ``POST /config``), and SERVER_VERSION (the version the emulator claims).
Knobs for docs/kube-api.md §3.4-§3.5 (watch timeouts, bookmarks), §3.3 (the too-large RV wait), §5 (Event
TTL), §7 (APF headers, request timeout) and §9 items 13, 16-18, 41, 44.

Runtime config (--config KEY=VALUE or POST /config): bookmark_interval=60, bookmark_before_deadline=2,
history_max_events=10000, history_max_age=0 (unlimited), event_ttl=3600, watch_timeout_min=1800,
too_large_wait=3, request_timeout=60, anonymous_401=false, csr_auto_approve=false, csr_sign=true,
csr_signing_duration=31536000, csr_backdate=300, coalesce=true, coalesce_window=0, split_bytes=0,
split_delay=0.02, gzip_min_bytes=131072, apf_headers=true, log_bodies=true.
"""


SERVER_VERSION = "v1.32.4"


DEFAULT_CONFIG = {
    "bookmark_interval": 60.0,        # seconds between BOOKMARKs (allowWatchBookmarks=true only)
    "bookmark_before_deadline": 2.0,  # one more bookmark this long before the watch deadline
    "history_max_events": 10000,      # watch history window, in events ...
    "history_max_age": 0.0,           # ... and in seconds (0 = unlimited)
    "event_ttl": 3600.0,              # core events expire this long after their last write
    "watch_timeout_min": 1800.0,      # watch without timeoutSeconds lasts random [min, 2*min] seconds
    "too_large_wait": 3.0,            # how long a "not older than N" read waits before 504 ResourceVersionTooLarge
    "request_timeout": 60.0,          # non-watch requests slower than this end in 504 Timeout
    "anonymous_401": False,           # requests without credentials get 401 instead of 403
    "csr_auto_approve": False,        # approve node-agent CSRs like gardener-resource-manager's approver
    "csr_sign": True,                 # sign approved kube-apiserver-client CSRs like kube-controller-manager
    "csr_signing_duration": 31536000, # --cluster-signing-duration: the longest certificate issued (seconds)
    "csr_backdate": 300,              # notBefore = now - this (capped at the lifetime), like the KCM signer
    "coalesce": True,                 # write all queued watch events in one chunk
    "coalesce_window": 0.0,           # wait this long after the first queued event to gather more
    "split_bytes": 0,                 # >0: split every watch write into chunks of at most this many bytes
    "split_delay": 0.02,              # pause between split chunks so they travel separately
    "gzip_min_bytes": 131072,         # gzip non-watch responses at least this big if the client accepts gzip
    "apf_headers": True,              # X-Kubernetes-PF-* headers on authenticated requests
    "log_bodies": True,               # keep request bodies (<= 64 KiB) in the request log
}


class Config(dict):
    def update_from(self, values):
        for k, v in values.items():
            if k not in DEFAULT_CONFIG:
                raise KeyError("unknown config key %r" % k)
            t = type(DEFAULT_CONFIG[k])
            self[k] = bool(v) if t is bool else (float(v) if t is float else int(v))
