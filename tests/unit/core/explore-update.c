/* SPDX-License-Identifier: Apache-2.0 */
/* The deep run of the update decider's exploration (update-model.h), for bench/run --only explore:
 *     explore-update [--depth N] [--oscs all|<ModelOsc index>,...] [--image] [--truth-only] [--max-states N]
 * Prints one JSON line {"depth","states","transitions","seconds","violation"} and, on a violation,
 * the shortest sequence as a ready-to-paste test on stderr. Exit 1 on a violation. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "update-model.h"
#include "util/macro.h"

static uint32_t parse_oscs(const char *s) {
        uint32_t m = 0;

        if (strcmp(s, "all") == 0)
                return ((1u << _OSC_MAX) - 1) & ~1u;
        for (const char *p = s; *p; p++)
                if (*p >= '1' && *p < '0' + _OSC_MAX)
                        m |= 1u << (*p - '0');
        return m;
}

int main(int argc, char **argv) {
        static const struct option opts[] = { { "depth", required_argument, NULL, 'd' },
                                              { "oscs", required_argument, NULL, 'o' },
                                              { "image", no_argument, NULL, 'i' },
                                              { "truth-only", no_argument, NULL, 't' },
                                              { "max-states", required_argument, NULL, 'm' },
                                              {} };
        ModelOptions o = { .depth = 9, .oscs = parse_oscs("all") };
        ModelResult r = {};
        struct timespec a, b;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (c) {
                case 'd':
                        o.depth = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'o':
                        o.oscs = parse_oscs(optarg);
                        break;
                case 'i':
                        o.os_image = true;
                        break;
                case 't':
                        o.truth_only = true;
                        break;
                case 'm':
                        o.max_states = strtoull(optarg, NULL, 10);
                        break;
                default:
                        return 2;
                }
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (model_explore(&o, &r) < 0)
                return 2;
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("{\"depth\": %u, \"states\": %zu, \"transitions\": %zu, \"seconds\": %.2f, \"truncated\": %s, "
               "\"violation\": %s%s%s}\n",
               r.depth, r.states, r.transitions,
               (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9,
               r.truncated ? "true" : "false", r.violated ? "\"" : "", r.violated ? r.violation : "null",
               r.violated ? "\"" : "");
        if (r.violated) {
                char *t = model_format_test("test_explored_violation", &o, &r);

                fprintf(stderr, "%s", t ? t : "");
                free(t);
        }
        c = r.violated ? 1 : 0;
        model_result_done(&r);
        return c;
}
