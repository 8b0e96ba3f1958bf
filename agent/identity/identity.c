/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <libgen.h>
#include <stdio.h>
#include <time.h>

#include "identity/client-csr.h"
#include "identity/csr-request.h"
#include "identity/gna-config.h"
#include "identity/identity.h"
#include "kube/kube-client.h"
#include "kube/kubeconfig.h"
#include "util/backoff.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/random-util.h"
#include "util/string-util.h"
#include "util/time-util.h"

#define GNA_CLUSTER_CA "cluster-ca.crt"
#define GNA_MACHINE_NAME "machine-name"
#define IDENTITY_RETRY_RESET_USEC (60 * 60 * USEC_PER_SEC)
#define KUBECONFIG_NAME "node-agent"

typedef enum IdentityState {
        IDENTITY_IDLE,       /* nothing in flight; maybe a renewal timer */
        IDENTITY_REQUESTING, /* a CSR is in flight */
        IDENTITY_RETRY_WAIT, /* backoff timer armed */
} IdentityState;

typedef enum Credential {
        CREDENTIAL_NONE,    /* missing or unusable */
        CREDENTIAL_OURS,    /* a client certificate of ours, valid now */
        CREDENTIAL_FOREIGN, /* token or other credentials we did not issue: left alone */
} Credential;

struct Identity {
        sd_event *event;            /* ref held */
        Http *http;                 /* borrowed */
        const KubeTuning *tuning;   /* borrowed */
        char *kubeconfig;           /* owned */
        char *pem_path;             /* owned: beside the kubeconfig */
        char *bootstrap_kubeconfig; /* owned */
        char *gna_directory;        /* owned */
        char *gna_server;           /* owned; may be NULL */
        char *node_name;            /* owned */
        char *renew_ca_file;        /* owned: the CA bundle a CA rotation renews against; NULL: none */
        unsigned expiration_seconds;
        IdentityCallback cb;
        void *userdata;

        IdentityState state;
        Credential credential;
        bool via_bootstrap;     /* the attempt in flight uses the bootstrap credential */
        KubeConfig *attempt_kc; /* owned: the cluster and credentials of the attempt */
        KubeClient *client;     /* owned: the attempt's client (kept until the next attempt) */
        ClientKey *key;         /* owned: the attempt's new key */
        CsrRequest *csr;        /* owned: in flight */
        sd_event_source *timer; /* owned: renewal or retry */
        Backoff backoff;
        UpdateFailureCode failure;
        char *status; /* owned; NULL when there is nothing to say */
};

static int set_status(Identity *id, const char *fmt, ...) _printf_(2, 3);
static int set_status(Identity *id, const char *fmt, ...) {
        va_list ap;
        int r;

        if (!fmt) {
                id->status = mfree(id->status);
                return 0;
        }
        va_start(ap, fmt);
        r = free_and_vprintf(&id->status, fmt, ap);
        va_end(ap);
        return r;
}

const char *identity_status(const Identity *id) {
        return id->status;
}

UpdateFailureCode identity_failure(const Identity *id) {
        return id->failure;
}

bool identity_usable(const Identity *id) {
        return id->credential != CREDENTIAL_NONE;
}

bool identity_is_foreign(const Identity *id) {
        return id->credential == CREDENTIAL_FOREIGN;
}

static char *path_beside(const char *file, const char *name) {
        _cleanup_free_ char *copy = strdup(file);
        char *p;

        if (!copy || asprintf(&p, "%s/%s", dirname(copy), name) < 0)
                return NULL;
        return p;
}

int identity_new(sd_event *event, Http *http, const KubeTuning *tuning, const IdentityParams *p,
                 IdentityCallback cb, void *userdata, Identity **ret) {
        _cleanup_(identity_freep) Identity *id = NULL;

        assert(event);
        assert(http);
        assert(tuning);
        assert(p && p->kubeconfig && p->bootstrap_kubeconfig && p->gna_directory && p->node_name);
        assert(cb);
        assert(ret);

        id = malloc(sizeof(*id));
        if (!id)
                return -ENOMEM;
        *id = (Identity) {
                .event = sd_event_ref(event),
                .http = http,
                .tuning = tuning,
                .cb = cb,
                .userdata = userdata,
                .failure = _UPDATE_FAILURE_INVALID,
                .expiration_seconds = p->expiration_seconds ?: CLIENT_CERT_EXPIRATION_SECONDS,
                .kubeconfig = strdup(p->kubeconfig),
                .pem_path = path_beside(p->kubeconfig, IDENTITY_PEM_NAME),
                .bootstrap_kubeconfig = strdup(p->bootstrap_kubeconfig),
                .gna_directory = strdup(p->gna_directory),
                .node_name = strdup(p->node_name),
        };
        if (!id->kubeconfig || !id->pem_path || !id->bootstrap_kubeconfig || !id->gna_directory ||
            !id->node_name || (p->gna_server && !(id->gna_server = strdup(p->gna_server))))
                return -ENOMEM;
        backoff_init(&id->backoff, tuning->identity_retry_base_usec, tuning->identity_retry_cap_usec,
                     IDENTITY_RETRY_RESET_USEC);
        *ret = TAKE_PTR(id);
        return 0;
}

int identity_gna_api_server(const char *gna_directory, char **ret_server, char **ret_ca_file) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        int r;

        assert(gna_directory && ret_server);
        *ret_server = NULL;
        if (ret_ca_file)
                *ret_ca_file = NULL;
        r = gna_config_read(gna_directory, &cc, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        *ret_server = TAKE_PTR(cc->api_server);
        if (ret_ca_file)
                *ret_ca_file = TAKE_PTR(cc->ca_file);
        return 0;
}

int identity_new_from_config(sd_event *event, Http *http, const KubeTuning *tuning, const Config *c,
                             IdentityCallback cb, void *userdata, Identity **ret) {
        _cleanup_free_ char *gna = NULL, *server = NULL;
        IdentityParams p = {
                .kubeconfig = c->kubeconfig,
                .bootstrap_kubeconfig = c->bootstrap_kubeconfig,
                .node_name = c->node_name,
        };

        /* GNA's files are part of the OSC's world: below osc.rootDirectory (docs/contract.md §9.5, §9.6). */
        if (path_below_root(c->osc.root_directory, IDENTITY_GNA_DIRECTORY, &gna) < 0)
                return -ENOMEM;
        p.gna_directory = gna;
        /* GNA's bootstrap token needs the server it is for: its provisioned component config says. */
        if (identity_gna_api_server(gna, &server, NULL) < 0)
                return -ENOMEM;
        p.gna_server = server;
        return identity_new(event, http, tuning, &p, cb, userdata, ret);
}

static void attempt_clear(Identity *id) {
        id->csr = csr_request_free(id->csr);
        id->key = client_key_free(id->key);
        id->client = kube_client_free(id->client);
        id->attempt_kc = kubeconfig_free(id->attempt_kc);
}

Identity *identity_free(Identity *id) {
        if (!id)
                return NULL;
        attempt_clear(id);
        sd_event_source_disable_unref(id->timer);
        sd_event_unref(id->event);
        free(id->kubeconfig);
        free(id->pem_path);
        free(id->bootstrap_kubeconfig);
        free(id->gna_directory);
        free(id->gna_server);
        free(id->node_name);
        free(id->renew_ca_file);
        free(id->status);
        free(id);
        return NULL;
}

int identity_machine_name(const char *gna_directory, const char *node_name, char **ret) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        char *name;
        size_t size;
        int r;

        if (asprintf(&path, "%s/" GNA_MACHINE_NAME, gna_directory) < 0)
                return -ENOMEM;
        r = read_full_file(path, 1024, &data, &size);
        if (r < 0 && r != -ENOENT)
                return r;
        if (r >= 0) {
                /* Trimmed like upstream's strings.TrimSpace. */
                while (size > 0 && strchr(" \t\r\n", data[size - 1]))
                        data[--size] = '\0';
                name = data + strspn(data, " \t\r\n");
        } else
                name = (char *) node_name;
        if (!client_machine_name_valid(name))
                return -EINVAL;
        *ret = strdup(name);
        return *ret ? 0 : -ENOMEM;
}

/* The PEM bytes of a kubeconfig's client certificate or key: inline data, or the file. Owned copy. */
static int credential_bytes(const char *data, size_t data_size, const char *file, char **ret,
                            size_t *ret_size) {
        if (data) {
                *ret = malloc(data_size + 1);
                if (!*ret)
                        return -ENOMEM;
                memcpy(*ret, data, data_size);
                (*ret)[data_size] = '\0';
                *ret_size = data_size;
                return 0;
        }
        if (!file)
                return -ENOENT;
        return read_full_file(file, CLIENT_PEM_MAX, ret, ret_size);
}

/* What the current kubeconfig holds; *ret_info is set for CREDENTIAL_OURS. `why` says what is wrong. */
static Credential current_credential(const Identity *id, ClientCertInfo *ret_info, const char **why) {
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_(client_key_freep) ClientKey *key = NULL;
        _cleanup_free_ char *text = NULL, *error = NULL, *cert = NULL;
        char *keypem = NULL;
        size_t size, cert_size, key_size = 0;
        int r;

        r = read_full_file(id->kubeconfig, KUBECONFIG_FILE_MAX, &text, &size);
        if (r < 0) {
                *why = r == -ENOENT ? "no kubeconfig yet" : "the kubeconfig is unreadable";
                return CREDENTIAL_NONE;
        }
        if (kubeconfig_parse(text, size, id->kubeconfig, &kc, &error) < 0) {
                *why = "the kubeconfig is invalid";
                return CREDENTIAL_NONE;
        }
        if (!kc->cert_data && !kc->cert_file)
                return CREDENTIAL_FOREIGN;
        if (credential_bytes(kc->cert_data, kc->cert_data_size, kc->cert_file, &cert, &cert_size) < 0 ||
            credential_bytes(kc->key_data, kc->key_data_size, kc->key_file, &keypem, &key_size) < 0) {
                *why = "the client certificate or key is unreadable";
                return CREDENTIAL_NONE;
        }
        r = client_key_from_pem(keypem, key_size, &key);
        erase_and_free(keypem, key_size);
        if (r < 0 || client_cert_info(cert, cert_size, key, ret_info) < 0) {
                *why = "the client certificate does not belong to its key or is invalid";
                return CREDENTIAL_NONE;
        }
        if (clock_now_usec(CLOCK_REALTIME) >= ret_info->not_after_usec) {
                *why = "the client certificate has expired";
                return CREDENTIAL_NONE;
        }
        return CREDENTIAL_OURS;
}

/* The bootstrap credential: bootstrapKubeconfig, else GNA's token + CA + server. Messages name files
 * only. */
static int bootstrap_kubeconfig(const Identity *id, KubeConfig **ret, char **ret_error) {
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_free_ char *text = NULL, *token = NULL, *ca = NULL;
        size_t size;
        int r;

        r = read_full_file(id->bootstrap_kubeconfig, KUBECONFIG_FILE_MAX, &text, &size);
        if (r >= 0)
                return kubeconfig_parse(text, size, id->bootstrap_kubeconfig, ret, ret_error);
        if (r != -ENOENT)
                return error_setf(ret_error, r, "%s: %s", id->bootstrap_kubeconfig, strerror(-r));

        if (asprintf(&token, "%s/" GNA_BOOTSTRAP_TOKEN, id->gna_directory) < 0 ||
            asprintf(&ca, "%s/" GNA_CLUSTER_CA, id->gna_directory) < 0)
                return -ENOMEM;
        if (access(token, R_OK) < 0 || access(ca, R_OK) < 0 || isempty(id->gna_server))
                return error_setf(ret_error, -ENOENT,
                                  "no bootstrap credential: neither %s nor %s with %s and a server in "
                                  "gardener-node-agent's component config",
                                  id->bootstrap_kubeconfig, token, ca);
        kc = calloc(1, sizeof(*kc));
        if (!kc)
                return -ENOMEM;
        /* The token stays in its file: the client reads it, we never hold or print it. */
        kc->source = strdup(token);
        kc->server = strdup(id->gna_server);
        kc->token_file = TAKE_PTR(token);
        kc->ca_file = TAKE_PTR(ca);
        if (!kc->source || !kc->server)
                return -ENOMEM;
        *ret = TAKE_PTR(kc);
        return 0;
}

static int current_kubeconfig(const Identity *id, KubeConfig **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_full_file(id->kubeconfig, KUBECONFIG_FILE_MAX, &text, &size);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", id->kubeconfig, strerror(-r));
        return kubeconfig_parse(text, size, id->kubeconfig, ret, ret_error);
}

/* kubeconfig text (JSON, which is YAML) naming the cluster of `kc` and the PEM file beside it. */
static char *kubeconfig_text(const Identity *id, const KubeConfig *kc) {
        _cleanup_free_ char *ca_b64 = NULL;
        json_t *cluster, *doc;
        char *text;

        cluster = json_pack("{s:s}", "server", kc->server);
        if (!cluster)
                return NULL;
        if (kc->ca_file)
                json_object_set_new(cluster, "certificate-authority", json_string(kc->ca_file));
        else if (kc->ca_data && base64_encode(kc->ca_data, kc->ca_data_size, /* url= */ false, &ca_b64) >= 0)
                json_object_set_new(cluster, "certificate-authority-data", json_string(ca_b64));
        if (kc->tls_server_name)
                json_object_set_new(cluster, "tls-server-name", json_string(kc->tls_server_name));
        doc = json_pack("{s:s, s:s, s:[{s:s, s:o}], s:[{s:s, s:{s:s, s:s}}], s:[{s:s, s:{s:s, s:s}}], s:s}",
                        "apiVersion", "v1", "kind", "Config", "clusters", "name", KUBECONFIG_NAME, "cluster",
                        cluster, "users", "name", KUBECONFIG_NAME, "user", "client-certificate",
                        id->pem_path, "client-key", id->pem_path, "contexts", "name", KUBECONFIG_NAME,
                        "context", "cluster", KUBECONFIG_NAME, "user", KUBECONFIG_NAME, "current-context",
                        KUBECONFIG_NAME);
        if (!doc)
                return NULL;
        text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(doc);
        return text;
}

/* The certificate and its key into the PEM file, then the kubeconfig: both 0600, atomically, in that
 * order, so the kubeconfig never names a file that is not there. */
static int store_credentials(Identity *id, const char *cert, size_t cert_size, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        char *key = NULL, *both = NULL;
        size_t key_size = 0, both_size;
        int r;

        r = client_key_to_pem(id->key, &key, &key_size);
        if (r < 0)
                return error_setf(ret_error, r, "encoding the private key: %s", strerror(-r));
        both_size = cert_size + key_size;
        both = malloc(both_size);
        if (!both) {
                erase_and_free(key, key_size);
                return -ENOMEM;
        }
        memcpy(both, cert, cert_size);
        memcpy(both + cert_size, key, key_size);
        erase_and_free(key, key_size);
        r = write_file_atomic(id->pem_path, both, both_size, 0600);
        erase_and_free(both, both_size);
        if (r < 0)
                return error_setf(ret_error, r, "writing %s: %s", id->pem_path, strerror(-r));

        text = kubeconfig_text(id, id->attempt_kc);
        if (!text)
                return -ENOMEM;
        r = write_file_atomic(id->kubeconfig, text, strlen(text), 0600);
        if (r < 0)
                return error_setf(ret_error, r, "writing %s: %s", id->kubeconfig, strerror(-r));
        return 0;
}

static int schedule(Identity *id, uint64_t at_usec, clockid_t clock, sd_event_time_handler_t handler);
static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);
static int on_renew(sd_event_source *s, uint64_t usec, void *userdata);

/* At a random point in 70-90 % of the certificate's lifetime. The timer cannot be added only when the
 * loop is finishing or out of memory: said, since then only a 401 or a restart renews it. */
static void schedule_renewal(Identity *id, const ClientCertInfo *info) {
        int r;

        r = schedule(id, client_cert_renew_at(info, ((uint64_t) random_u32() << 32) | random_u32()),
                     CLOCK_REALTIME, on_renew);
        if (r < 0)
                log_error_errno(r,
                                "Cannot schedule the client certificate's renewal; the next 401 or restart "
                                "renews it: %m");
}

static void fail(Identity *id, const char *message) {
        uint64_t now = 0, delay;
        char buf[32];

        (void) sd_event_now(id->event, CLOCK_MONOTONIC, &now);
        delay = backoff_next(&id->backoff, now, random_u32());
        /* Without a usable certificate it is a bootstrap; with one (renewal, CA rotation) a rotation. */
        id->failure = id->via_bootstrap ? UPDATE_FAILURE_BOOTSTRAP_FAILED :
                                          UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED;
        id->state = IDENTITY_RETRY_WAIT;
        (void) set_status(id, "%s: %s; retrying in %s", update_failure_code_to_string(id->failure), message,
                          format_duration(buf, sizeof(buf), delay));
        log_warning("%s", id->status);
        if (schedule(id, delay, CLOCK_MONOTONIC, on_retry) < 0)
                log_error("Cannot schedule the identity retry; the next 401 or restart retries.");
        id->cb(id, IDENTITY_FAILED, id->userdata);
}

static void on_csr_done(CsrRequest *r, CsrOutcome outcome, int error, const char *cert, size_t cert_size,
                        const char *message, void *userdata) {
        Identity *id = userdata;
        _cleanup_free_ char *werr = NULL;
        ClientCertInfo info;
        int k;

        id->csr = csr_request_free(id->csr);
        if (outcome == CSR_ERROR && error == -EACCES && !id->via_bootstrap) {
                /* Our certificate was rejected while renewing with it: only a bootstrap can help. */
                log_warning("%s; bootstrapping instead.", message);
                id->credential = CREDENTIAL_NONE;
                id->state = IDENTITY_RETRY_WAIT;
                if (schedule(id, 0, CLOCK_MONOTONIC, on_retry) < 0)
                        fail(id, message);
                return;
        }
        if (outcome != CSR_ISSUED)
                return fail(id, message);
        k = client_cert_info(cert, cert_size, id->key, &info);
        if (k < 0 || !info.is_client_auth)
                return fail(id,
                            k == -EKEYREJECTED ? "the issued certificate is not for our key" :
                                                 "the issued certificate is not a client certificate");
        k = store_credentials(id, cert, cert_size, &werr);
        if (k < 0)
                return fail(id, werr ?: strerror(-k));

        log_info("Client certificate obtained (%s), valid until %llu (epoch s); kubeconfig %s written.",
                 message, (unsigned long long) (info.not_after_usec / USEC_PER_SEC), id->kubeconfig);
        id->state = IDENTITY_IDLE;
        id->credential = CREDENTIAL_OURS;
        id->failure = _UPDATE_FAILURE_INVALID;
        id->renew_ca_file = mfree(id->renew_ca_file);
        backoff_reset(&id->backoff);
        (void) set_status(id, NULL);
        schedule_renewal(id, &info);
        id->cb(id, IDENTITY_CHANGED, id->userdata);
}

/* A CA rotation's renewal trusts the new bundle, and the kubeconfig it writes names that file: the
 * rotation rewrites it, so later phases of the rotation (the API server serving with the new CA, the
 * old one dropped from the bundle) are followed, as upstream's kubeconfig names GNA's caFile. */
static int use_renew_ca(Identity *id) {
        KubeConfig *kc = id->attempt_kc;

        if (!id->renew_ca_file)
                return 0;
        if (free_and_strdup(&kc->ca_file, id->renew_ca_file) < 0)
                return -ENOMEM;
        kc->ca_data = mfree(kc->ca_data);
        kc->ca_data_size = 0;
        return 0;
}

/* One attempt: a fresh key, a CSR through the bootstrap credential or the current certificate. Every
 * failure ends in fail(), which schedules the retry. */
static void attempt(Identity *id, bool via_bootstrap) {
        _cleanup_free_ char *error = NULL, *machine = NULL, *name = NULL, *pem = NULL;
        _cleanup_(json_decrefp) json_t *obj = NULL;
        size_t pem_size;
        int r;

        attempt_clear(id);
        id->timer = sd_event_source_disable_unref(id->timer);
        id->via_bootstrap = via_bootstrap;
        id->state = IDENTITY_REQUESTING;

        r = via_bootstrap ? bootstrap_kubeconfig(id, &id->attempt_kc, &error) :
                            current_kubeconfig(id, &id->attempt_kc, &error);
        if (r >= 0)
                r = use_renew_ca(id);
        if (r < 0)
                return fail(id, error ?: strerror(-r));
        r = kube_client_new(id->event, id->http, id->attempt_kc, id->tuning, &id->client);
        if (r < 0)
                return fail(id, "cannot create the API client");
        r = identity_machine_name(id->gna_directory, id->node_name, &machine);
        if (r < 0)
                return fail(id, "no valid machine name (" GNA_MACHINE_NAME " file or node name)");
        r = client_key_generate(&id->key);
        if (r >= 0)
                r = client_csr_build(id->key, machine, &pem, &pem_size);
        if (r >= 0)
                r = client_csr_name(id->key, machine, &name);
        obj = r >= 0 ? client_csr_object(name, pem, pem_size, id->expiration_seconds) : NULL;
        if (!obj)
                return fail(id, "cannot build the certificate request");
        r = csr_request_start(id->client, obj, id->tuning->csr_poll_usec, id->tuning->csr_timeout_usec,
                              on_csr_done, id, &id->csr);
        if (r < 0)
                return fail(id, "cannot send the CertificateSigningRequest");
        (void) set_status(id, "%s: waiting for CertificateSigningRequest %s to be issued",
                          via_bootstrap ? "bootstrapping the client certificate" :
                                          "renewing the client certificate",
                          name);
        log_info("Requesting a client certificate for machine %s through CertificateSigningRequest %s (%s).",
                 machine, name, via_bootstrap ? "bootstrap credential" : "current certificate");
}

static int schedule(Identity *id, uint64_t at_usec, clockid_t clock, sd_event_time_handler_t handler) {
        id->timer = sd_event_source_disable_unref(id->timer);
        if (clock == CLOCK_MONOTONIC)
                return sd_event_add_time_relative(id->event, &id->timer, clock, at_usec, 0, handler, id);
        return sd_event_add_time(id->event, &id->timer, clock, at_usec, USEC_PER_SEC, handler, id);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Identity *id = userdata;

        id->timer = sd_event_source_disable_unref(id->timer);
        /* Renew with our certificate while it still works; once it does not, only a bootstrap can. */
        attempt(id, id->credential != CREDENTIAL_OURS);
        return 0;
}

static int on_renew(sd_event_source *s, uint64_t usec, void *userdata) {
        Identity *id = userdata;

        id->timer = sd_event_source_disable_unref(id->timer);
        log_info("Client certificate reached its renewal time.");
        return on_retry(NULL, 0, id);
}

int identity_start(Identity *id) {
        ClientCertInfo info;
        const char *why = NULL;

        assert(id);

        id->credential = current_credential(id, &info, &why);
        switch (id->credential) {
        case CREDENTIAL_FOREIGN:
                log_debug("Kubeconfig %s holds credentials this agent did not issue; no renewal.",
                          id->kubeconfig);
                return 1;
        case CREDENTIAL_OURS:
                schedule_renewal(id, &info);
                return 1;
        case CREDENTIAL_NONE:
        default:
                log_notice("Bootstrapping the client certificate: %s.", why);
                attempt(id, /* via_bootstrap= */ true);
                return 0;
        }
}

static void identity_on_unauthorized(KubeClient *c, void *userdata) {
        identity_unauthorized(userdata);
}

void identity_watch_client(Identity *id, KubeClient *client) {
        assert(id && client);
        kube_client_set_unauthorized_callback(client, identity_on_unauthorized, id);
}

void identity_unauthorized(Identity *id) {
        assert(id);

        if (id->state != IDENTITY_IDLE || id->credential != CREDENTIAL_OURS)
                return; /* already on it, or not our certificate to replace */
        log_warning("The API server rejected the client certificate (401); bootstrapping a new one.");
        id->credential = CREDENTIAL_NONE;
        attempt(id, /* via_bootstrap= */ true);
}

int identity_renew(Identity *id, const char *ca_file) {
        int r;

        assert(id);

        r = free_and_strdup(&id->renew_ca_file, ca_file);
        if (r < 0)
                return r;
        /* A request in flight (a scheduled renewal, a retry) was made before the call: its certificate
         * must not stand for this one, so it is dropped and a new one made. */
        attempt(id, id->credential != CREDENTIAL_OURS);
        return 0;
}
