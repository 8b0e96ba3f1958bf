/* SPDX-License-Identifier: Apache-2.0 */
/* Command line (docs/contract.md §2): parse argv, set up logging, hand over to the Manager or to one of
 * the offline verbs. Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include "build-config.h"
#include "daemon/config-files.h"
#include "daemon/manager.h"
#include "daemon/status.h"
#include "kube/kube-tuning.h"
#include "update/catalog-ids.h"
#include "util/log.h"

#define EXIT_USAGE 2

static const char *arg_config = NULL;
static bool arg_config_given = false;
static const char *arg_node_name = NULL;
static const char *arg_kubeconfig = NULL;
static const char *arg_state_dir = NULL;
static bool arg_json = false;

typedef enum Verb {
        VERB_RUN,
        VERB_STATUS,
        VERB_CHECK_CONFIG,
} Verb;

static void help(void) {
        printf("Usage: inplace-agent [run] [OPTIONS]\n"
               "       inplace-agent status [--json] [--state-dir DIR]\n"
               "       inplace-agent check-config [--config PATH]\n"
               "       inplace-agent --version | --help\n\n"
               "In-place node update agent for Gardener / machine-controller-manager.\n\n"
               "Options:\n"
               "  -c --config PATH      configuration file (default %s)\n"
               "     --node-name NAME   name of this Node (default $NODE_NAME, else hostname)\n"
               "     --kubeconfig PATH  kubeconfig (default $KUBECONFIG, else from config)\n"
               "     --state-dir DIR    state directory (default /var/lib/inplace-agent)\n"
               "     --log-level LEVEL  debug, info, notice, warning, err (default info)\n"
               "     --json             status: machine-readable output\n"
               "  -h --help             show this help\n"
               "     --version          show the version\n\n"
               "See inplace-agent(8) and inplace-agent.yaml(5).\n",
               CONFIG_DEFAULT_PATH);
}

static int usage_error(const char *fmt, const char *arg) {
        fprintf(stderr, "inplace-agent: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\nTry 'inplace-agent --help'.\n");
        return -EINVAL;
}

/* Returns 1 to continue, 0 to exit successfully (--help/--version), <0 for usage errors. */
static int parse_argv(int argc, char *argv[], Verb *ret_verb) {
        enum { ARG_NODE_NAME = 0x100, ARG_KUBECONFIG, ARG_STATE_DIR, ARG_LOG_LEVEL, ARG_JSON, ARG_VERSION };
        static const struct option options[] = { { "config", required_argument, NULL, 'c' },
                                                 { "node-name", required_argument, NULL, ARG_NODE_NAME },
                                                 { "kubeconfig", required_argument, NULL, ARG_KUBECONFIG },
                                                 { "state-dir", required_argument, NULL, ARG_STATE_DIR },
                                                 { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                                                 { "json", no_argument, NULL, ARG_JSON },
                                                 { "help", no_argument, NULL, 'h' },
                                                 { "version", no_argument, NULL, ARG_VERSION },
                                                 {} };
        Verb verb = VERB_RUN;
        int c, level;

        /* The verb, if any, comes first; everything after it is options. */
        if (argc > 1 && argv[1][0] != '-') {
                if (streq(argv[1], "run"))
                        verb = VERB_RUN;
                else if (streq(argv[1], "status"))
                        verb = VERB_STATUS;
                else if (streq(argv[1], "check-config"))
                        verb = VERB_CHECK_CONFIG;
                else
                        return usage_error("unknown command '%s'", argv[1]);
                argv[1] = argv[0];
                argc--;
                argv++;
        }

        while ((c = getopt_long(argc, argv, "c:h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        arg_config = optarg;
                        arg_config_given = true;
                        break;
                case ARG_NODE_NAME:
                        arg_node_name = optarg;
                        break;
                case ARG_KUBECONFIG:
                        arg_kubeconfig = optarg;
                        break;
                case ARG_STATE_DIR:
                        arg_state_dir = optarg;
                        break;
                case ARG_LOG_LEVEL:
                        level = log_level_from_string(optarg);
                        if (level < 0)
                                return usage_error("invalid --log-level '%s'", optarg);
                        log_set_max_level(level);
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("inplace-agent %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }

        if (optind < argc)
                return usage_error("unexpected argument '%s'", argv[optind]);
        if (verb == VERB_STATUS && (arg_config_given || arg_node_name || arg_kubeconfig))
                return usage_error("%s", "status accepts only --json and --state-dir");
        if (verb != VERB_STATUS && arg_json)
                return usage_error("%s", "--json is only valid with status");

        *ret_verb = verb;
        return 1;
}

/* Loads and validates the configuration; NULL and the reason (*ret_error) on error. */
static Config *load_config(char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = config_new(&c);
        if (r < 0) {
                *ret_error = strdup(strerror(-r));
                return NULL;
        }
        /* The default file may be absent (every key is optional); an explicit --config must exist. */
        r = config_load_files(c, arg_config ? arg_config : CONFIG_DEFAULT_PATH,
                              /* optional= */ !arg_config_given, &error);
        if (r >= 0)
                r = config_load_environment(c, arg_node_name, arg_kubeconfig, arg_state_dir, &error);
        if (r < 0) {
                *ret_error = error ? TAKE_PTR(error) : strdup(strerror(-r));
                return NULL;
        }
        return TAKE_PTR(c);
}

/* The daemon's configuration errors go to the journal with their catalog entry (journalctl -x
 * explains them); check-config prints to stderr like any command. */
static int config_error(const char *error) {
        (void) log_struct_id(LOG_ERR, 0, MESSAGE_ID_CONFIG_ERROR, "Configuration error: %s",
                             error ? error : strerror(ENOMEM));
        return EXIT_USAGE;
}

static int verb_check_config(void) {
        _cleanup_free_ char *error = NULL;
        _cleanup_(config_freep) Config *c = load_config(&error);
        json_t *j;
        char *s;

        if (!c) {
                fprintf(stderr, "inplace-agent: configuration error: %s\n",
                        error ? error : strerror(ENOMEM));
                return EXIT_USAGE;
        }
        j = config_to_json(c);
        s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (!s) {
                log_oom();
                return EXIT_FAILURE;
        }
        printf("%s\n", s);
        free(s);
        return EXIT_SUCCESS;
}

static int verb_run(void) {
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL;
        KubeTuning tuning;
        sigset_t ss;
        int r;

        c = load_config(&error);
        if (!c)
                return config_error(error);
        kube_tuning_init(&tuning);
        r = kube_tuning_parse(&tuning, getenv(KUBE_TUNING_ENV), &error);
        if (r < 0)
                return config_error(error ? error : strerror(-r));

        /* sd-event delivers SIGTERM/SIGINT through a signalfd; they must be blocked first. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &ss, NULL);

        r = manager_new(&c, &tuning, &m, &error);
        if (r == -ENOMEM) {
                log_oom();
                return EXIT_FAILURE;
        }
        if (r < 0) /* logged here only, once: an unusable state directory is a configuration error too */
                return config_error(error ? error : strerror(-r));
        r = manager_run(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char *argv[]) {
        Verb verb = VERB_RUN;
        int r;

        /* Set by the unit so that gnutls, which libcurl drags in (via libldap and librtmp) and nothing
         * here calls, skips its constructor's work (~0.1 MiB of heap in an idle daemon). It has done
         * its job once we run: children (the OS update command, which may well use gnutls) must not
         * inherit it. */
        (void) unsetenv("GNUTLS_NO_IMPLICIT_INIT");

        r = parse_argv(argc, argv, &verb);
        if (r < 0)
                return EXIT_USAGE;
        if (r == 0)
                return EXIT_SUCCESS;

        switch (verb) {
        case VERB_CHECK_CONFIG:
                return verb_check_config();
        case VERB_STATUS:
                return status_print(arg_state_dir ? arg_state_dir : "/var/lib/inplace-agent", arg_json);
        case VERB_RUN:
        default:
                return verb_run();
        }
}
