/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/contact-blocker.h"
#include "util/time-util.h"
#include "util/utf8.h"

void contact_blocker_done(ContactBlocker *b) {
        if (!b)
                return;
        free(b->reason);
        free(b->first_reason);
        for (size_t i = 0; i < ELEMENTSOF(b->said); i++)
                free(b->said[i].reason);
        *b = (ContactBlocker) { .contacted = b->contacted };
}

static ContactSaid *said_find(ContactBlocker *b, const char *reason) {
        for (size_t i = 0; i < ELEMENTSOF(b->said); i++)
                if (streq_ptr(b->said[i].reason, reason))
                        return &b->said[i];
        return NULL;
}

int contact_blocker_set(ContactBlocker *b, const char *reason, uint64_t now_usec, uint64_t now_realtime_usec,
                        bool *ret_changed) {
        _cleanup_free_ char *clean = NULL;
        ContactSaid *said;
        bool changed;

        assert(b);

        if (ret_changed)
                *ret_changed = false;
        if (b->contacted)
                return 0;
        clean = utf8_sanitize(strempty(reason), strlen(strempty(reason)), CONTACT_REASON_MAX);
        if (!clean)
                return -ENOMEM;
        changed = !streq_ptr(clean, b->reason);
        if (!b->reason) {
                b->since_usec = now_usec;
                b->since_realtime_usec = now_realtime_usec;
                if (free_and_strdup(&b->first_reason, clean) < 0)
                        return -ENOMEM;
        }
        if (changed) {
                free(b->reason);
                b->reason = TAKE_PTR(clean);
        }
        if (ret_changed)
                *ret_changed = changed;
        said = said_find(b, b->reason);
        return !said || now_usec >= said->usec + CONTACT_CONSOLE_REPEAT_USEC;
}

bool contact_blocker_told_console(const ContactBlocker *b) {
        assert(b);
        for (size_t i = 0; i < ELEMENTSOF(b->said); i++)
                if (b->said[i].reason)
                        return true;
        return false;
}

void contact_blocker_console_written(ContactBlocker *b, uint64_t now_usec) {
        ContactSaid *said;

        assert(b);
        if (!b->reason)
                return;
        said = said_find(b, b->reason);
        if (!said) {
                /* A free slot, else the one told longest ago. */
                said = &b->said[0];
                for (size_t i = 0; i < ELEMENTSOF(b->said) && said->reason; i++)
                        if (!b->said[i].reason || b->said[i].usec < said->usec)
                                said = &b->said[i];
                if (free_and_strdup(&said->reason, b->reason) < 0)
                        return;
        }
        said->usec = now_usec;
}

int contact_blocker_contact(ContactBlocker *b, uint64_t now_usec, uint64_t min_usec, char **ret_message) {
        char d[DURATION_MAX_STR];
        uint64_t took;
        int k = 0;

        assert(b);
        assert(ret_message);

        *ret_message = NULL;
        b->contacted = true;
        if (!b->reason)
                return 0;
        took = now_usec > b->since_usec ? now_usec - b->since_usec : 0;
        if (took >= min_usec) {
                /* Whole seconds: "2m13s", not "2m13s456ms". */
                (void) format_duration(d, sizeof(d), took / USEC_PER_SEC * USEC_PER_SEC);
                if (streq(b->reason, b->first_reason))
                        k = asprintf(ret_message,
                                     "no access to the API server for %s before the first successful "
                                     "contact: %s",
                                     d, b->reason);
                else
                        k = asprintf(ret_message,
                                     "no access to the API server for %s before the first successful "
                                     "contact: %s (at first: %s)",
                                     d, b->reason, b->first_reason);
        }
        contact_blocker_done(b);
        if (k < 0) {
                *ret_message = NULL;
                return -ENOMEM;
        }
        return 1;
}

const char *contact_error_phrase(int error) {
        switch (error) {
        case -ECONNREFUSED:
                return "connection refused";
        case -EHOSTUNREACH:
                return "the host cannot be resolved or reached";
        case -ETIMEDOUT:
                return "timed out";
        case -ECONNRESET:
                return "the connection broke";
        case -EKEYREJECTED:
                return "the server's TLS certificate is not trusted (the kubeconfig's CA)";
        case -ENOKEY:
                return "the TLS handshake failed (client certificate, key or CA file)";
        case -EACCES:
                return "unauthorized (HTTP 401): the API server does not accept the agent's credentials";
        case -EPERM:
                return "forbidden (HTTP 403)";
        case -EAGAIN:
                return "the API server is overloaded or unavailable (HTTP 429/503)";
        default:
                return strerror(-error);
        }
}
