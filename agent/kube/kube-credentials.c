/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <sys/stat.h>

#include "kube/kube-credentials.h"
#include "util/fileio.h"

typedef struct TrackedFile {
        char *path; /* owned; NULL = not configured */
        char *data; /* owned: last good content; NULL = never read */
        size_t size;
        int error; /* last read error, 0 if the last read worked */
        dev_t dev;
        ino_t ino;
        off_t st_size;
        struct timespec mtime;
} TrackedFile;

struct KubeCredentials {
        char *static_token; /* owned; NULL = none */
        TrackedFile token;
        uint64_t token_read_usec; /* monotonic time of the last successful read */
        uint64_t token_refresh_usec;
        bool token_stale; /* a 401 was seen: re-read before the next request */

        TrackedFile ca, cert, key;
        char *ca_data; /* owned: inline PEM from the kubeconfig; NULL = none */
        size_t ca_data_size;
        char *cert_data; /* owned: inline PEM */
        size_t cert_data_size;
        char *key_data; /* owned: inline PEM */
        size_t key_data_size;
        char *server_name; /* owned: tls-server-name; NULL = URL host */
};

static void secure_free(char *p, size_t size) {
        if (p)
                explicit_bzero(p, size);
        free(p);
}

static void tracked_done(TrackedFile *f) {
        secure_free(f->data, f->size);
        free(f->path);
}

KubeCredentials *kube_credentials_free(KubeCredentials *c) {
        if (!c)
                return NULL;
        if (c->static_token)
                secure_free(c->static_token, strlen(c->static_token));
        tracked_done(&c->token);
        tracked_done(&c->ca);
        tracked_done(&c->cert);
        tracked_done(&c->key);
        free(c->ca_data);
        free(c->cert_data);
        secure_free(c->key_data, c->key_data_size);
        free(c->server_name);
        free(c);
        return NULL;
}

static int dup_blob(const char *src, size_t size, char **dst, size_t *dst_size) {
        if (!src)
                return 0;
        *dst = malloc(size + 1);
        if (!*dst)
                return -ENOMEM;
        memcpy(*dst, src, size);
        (*dst)[size] = '\0';
        *dst_size = size;
        return 0;
}

static int tracked_init(TrackedFile *f, const char *path) {
        *f = (TrackedFile) {};
        if (!path)
                return 0;
        f->path = strdup(path);
        return f->path ? 0 : -ENOMEM;
}

/* Reads the file; on success replaces the content and returns 1 if it differs, else 0. */
static int tracked_read(TrackedFile *f, size_t max, bool trim) {
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t size;
        int r;

        r = read_full_file(f->path, max, &data, &size);
        if (r >= 0 && stat(f->path, &st) < 0)
                r = -errno;
        if (r >= 0 && trim) {
                size_t start = strspn(data, " \t\r\n");

                while (size > start && strchr(" \t\r\n", data[size - 1]))
                        data[--size] = '\0';
                memmove(data, data + start, size - start + 1);
                size -= start;
                /* An empty token is an error (client-go), as is one that cannot be a header value. */
                if (size == 0)
                        r = -ENODATA;
                for (size_t i = 0; r >= 0 && i < size; i++)
                        if ((unsigned char) data[i] < 0x20 || data[i] == 0x7f)
                                r = -EBADMSG;
        }
        if (r < 0) {
                if (data)
                        explicit_bzero(data, size);
                f->error = r;
                return r;
        }

        f->error = 0;
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->st_size = st.st_size;
        f->mtime = st.st_mtim;
        if (f->data && f->size == size && memcmp(f->data, data, size) == 0) {
                explicit_bzero(data, size);
                return 0;
        }
        secure_free(f->data, f->size);
        f->data = TAKE_PTR(data);
        f->size = size;
        return 1;
}

static bool tracked_changed_on_disk(const TrackedFile *f) {
        struct stat st;

        if (!f->path)
                return false;
        if (!f->data)
                return true;
        if (stat(f->path, &st) < 0)
                return false; /* vanished mid-rotation: keep using what we have */
        return st.st_dev != f->dev || st.st_ino != f->ino || st.st_size != f->st_size ||
                st.st_mtim.tv_sec != f->mtime.tv_sec || st.st_mtim.tv_nsec != f->mtime.tv_nsec;
}

int kube_credentials_new(const KubeConfig *kc, uint64_t token_refresh_usec, uint64_t now_usec,
                         KubeCredentials **ret) {
        _cleanup_(kube_credentials_freep) KubeCredentials *c = NULL;
        int r;

        assert(kc);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->token_refresh_usec = token_refresh_usec;
        if (kc->token && !(c->static_token = strdup(kc->token)))
                return -ENOMEM;
        if (kc->tls_server_name && !(c->server_name = strdup(kc->tls_server_name)))
                return -ENOMEM;
        if ((r = tracked_init(&c->token, kc->token_file)) < 0 ||
            (r = tracked_init(&c->ca, kc->ca_file)) < 0 || (r = tracked_init(&c->cert, kc->cert_file)) < 0 ||
            (r = tracked_init(&c->key, kc->key_file)) < 0 ||
            (r = dup_blob(kc->ca_data, kc->ca_data_size, &c->ca_data, &c->ca_data_size)) < 0 ||
            (r = dup_blob(kc->cert_data, kc->cert_data_size, &c->cert_data, &c->cert_data_size)) < 0 ||
            (r = dup_blob(kc->key_data, kc->key_data_size, &c->key_data, &c->key_data_size)) < 0)
                return r;

        /* Failures here are not fatal: the files may appear later, and every request refreshes again
         * and fails with the error then. */
        IGNORE_RESULT(kube_credentials_refresh(c, now_usec));

        *ret = TAKE_PTR(c);
        return 0;
}

static int tracked_ensure(TrackedFile *f) {
        int r;

        if (!f->path || f->data)
                return 0;
        r = tracked_read(f, KUBE_CREDENTIALS_FILE_MAX, /* trim= */ false);
        return r < 0 ? r : 0;
}

int kube_credentials_refresh(KubeCredentials *c, uint64_t now_usec) {
        int r, ret = 0;

        assert(c);

        if (c->token.path &&
            (!c->token.data || c->token_stale || now_usec >= c->token_read_usec + c->token_refresh_usec)) {
                r = tracked_read(&c->token, KUBE_TOKEN_MAX, /* trim= */ true);
                if (r >= 0) {
                        c->token_read_usec = now_usec;
                        c->token_stale = false;
                }
                if (r < 0 && !c->token.data && !c->static_token)
                        ret = r;
        }

        r = tracked_ensure(&c->ca);
        if (r < 0 && ret == 0)
                ret = r;
        r = tracked_ensure(&c->cert);
        if (r < 0 && ret == 0)
                ret = r;
        r = tracked_ensure(&c->key);
        if (r < 0 && ret == 0)
                ret = r;
        return ret;
}

int kube_credentials_check_files(KubeCredentials *c) {
        TrackedFile *files[] = { &c->ca, &c->cert, &c->key };
        bool changed = false;

        assert(c);

        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                if (tracked_changed_on_disk(files[i]) &&
                    tracked_read(files[i], KUBE_CREDENTIALS_FILE_MAX, /* trim= */ false) > 0)
                        changed = true;
        return changed;
}

bool kube_credentials_invalidate_token(KubeCredentials *c) {
        assert(c);

        c->token_stale = true;
        return c->token.path != NULL;
}

const char *kube_credentials_token(const KubeCredentials *c) {
        assert(c);

        return c->token.data ? c->token.data : c->static_token;
}

void kube_credentials_tls(const KubeCredentials *c, HttpTls *ret) {
        assert(c);
        assert(ret);

        *ret = (HttpTls) {
                .ca_pem = c->ca_data ? c->ca_data : c->ca.data,
                .ca_pem_size = c->ca_data ? c->ca_data_size : c->ca.size,
                .cert_pem = c->cert_data ? c->cert_data : c->cert.data,
                .cert_pem_size = c->cert_data ? c->cert_data_size : c->cert.size,
                .key_pem = c->key_data ? c->key_data : c->key.data,
                .key_pem_size = c->key_data ? c->key_data_size : c->key.size,
                .server_name = c->server_name,
        };
}
