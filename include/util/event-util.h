/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small sd-event helpers shared by every layer that runs on the loop: the loop's clock and arming a
 * one-shot timer. The types are declared, not included, so util/ headers stay free of sd-* headers
 * (check-layers.py); the callers include <systemd/sd-event.h> themselves. Does not log. */

#include <stdint.h>

typedef struct sd_event sd_event;
typedef struct sd_event_source sd_event_source;

/* CLOCK_MONOTONIC as the loop sees it (the time of the current iteration, so everything handled in
 * one iteration agrees), or read directly when the loop cannot say. µs. */
uint64_t event_now_usec(sd_event *e);

/* Fires the timer source `s` once, `delay_usec` from now. -errno (the loop is finishing: -ESTALE;
 * a forked child: -ECHILD). */
int event_timer_arm(sd_event_source *s, uint64_t delay_usec);
