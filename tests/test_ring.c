/* Ring invariants: geometry, empty/full, wrap-around, contiguous reserve,
 * peek/consume, slot validity across laps, named segments. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"

/* The ring's info (every member this test knows). */
static sr_ring_info info_of(const sr_ring *r)
{
	sr_ring_info info = {.size = sizeof(info)};

	assert_int_equal(sr_ring_info_get(r, &info), 0);
	return info;
}

static sr_ring *mk(uint64_t cap, uint32_t obs_dim)
{
	sr_ring_opts o = {.obs_dim = obs_dim, .act_size = 4, .capacity = cap};
	sr_ring *r = NULL;

	assert_int_equal(sr_ring_create(&o, &r), 0);
	assert_non_null(r);
	return r;
}

/* Write slot @s with values derived from s. */
static void fill(sr_ring *r, uint64_t s)
{
	uint64_t i = s & (sr_ring_capacity(r) - 1);
	uint32_t d = sr_ring_obs_dim(r);
	int32_t a = (int32_t)s;

	for (uint32_t k = 0; k < d; k++)
		sr_ring_obs_col(r)[i * d + k] = (float)(s * 10 + k);
	memcpy(sr_ring_action_col(r) + i * 4, &a, 4);
	sr_ring_reward_col(r)[i] = (float)s * 0.5f;
	sr_ring_terminated_col(r)[i] = (uint8_t)(s % 7 == 0);
	sr_ring_truncated_col(r)[i] = 0;
	sr_ring_flags_col(r)[i] = 0;
	sr_ring_env_id_col(r)[i] = (uint32_t)(s % 3);
	sr_ring_prev_col(r)[i] = s >= 3 ? s - 3 : SR_RING_NO_PREV;
}

static void check(sr_ring *r, uint64_t s)
{
	uint64_t i = s & (sr_ring_capacity(r) - 1);
	uint32_t d = sr_ring_obs_dim(r);
	int32_t a;

	assert_true(sr_ring_slot_valid(r, s));
	for (uint32_t k = 0; k < d; k++)
		assert_true(sr_ring_obs_col(r)[i * d + k] == (float)(s * 10 + k));
	memcpy(&a, sr_ring_action_col(r) + i * 4, 4);
	assert_int_equal(a, (int32_t)s);
	assert_true(sr_ring_reward_col(r)[i] == (float)s * 0.5f);
	assert_int_equal(sr_ring_env_id_col(r)[i], s % 3);
}

static void test_geometry(void **st)
{
	sr_ring_opts o = {.obs_dim = 4, .act_size = 4, .capacity = 1000};
	sr_ring *r = NULL;

	(void)st;
	assert_int_equal(sr_ring_create(&o, &r), -EINVAL);
	assert_null(r);
	assert_non_null(strstr(sr_last_error(), "power of two"));
	o.capacity = 1;
	assert_int_equal(sr_ring_create(&o, &r), -EINVAL);
	o.capacity = 64;
	o.obs_dim = 0;
	assert_int_equal(sr_ring_create(&o, &r), -EINVAL);
	o.obs_dim = 4;
	o.act_size = 0;
	assert_int_equal(sr_ring_create(&o, &r), -EINVAL);
	o.act_size = 4;
	o.flags = 1u << 7;
	assert_int_equal(sr_ring_create(&o, &r), -EINVAL);
	o.flags = 0;
	assert_int_equal(sr_ring_memsize(&o) % 4096, 0);
	assert_true(sr_ring_memsize(&o) >= 64 * (16 + 4 + 4 + 3 + 4 + 8 + 8));
	assert_int_equal(sr_ring_create(&o, &r), 0);
	assert_int_equal(sr_ring_capacity(r), 64);
	assert_int_equal(sr_ring_obs_dim(r), 4);
	assert_int_equal(sr_ring_act_size(r), 4);
	sr_ring_info info = {.size = sizeof(info)};
	assert_int_equal(sr_ring_info_get(r, &info), 0);
	size_t len = (size_t)info.bytes;
	char *base = info.base;
	assert_int_equal(len, sr_ring_memsize(&o));
	assert_true((char *)sr_ring_obs_col(r) > base && (char *)sr_ring_obs_col(r) < base + len);
	assert_true((char *)sr_ring_prev_col(r) < base + len);
	assert_true(base + info.offsets[SR_RING_COL_OBS] == (char *)sr_ring_obs_col(r));
	assert_true(base + info.offsets[SR_RING_COL_PREV] == (char *)sr_ring_prev_col(r));
	assert_int_equal(info.kind, SR_SEGMENT_RING);
	assert_int_equal(info.version, SR_RING_FORMAT_VERSION);
	assert_int_equal(info.capacity, 64);
	assert_int_equal(info.obs_dim, 4);
	assert_int_equal(info.act_size, 4);
	assert_int_equal(sr_ring_head(r), 0);
	assert_int_equal(sr_ring_cursor(r), 0);
	assert_int_equal(info.oldest, 0);
	assert_int_equal(info.flags & SR_RING_INFO_READ_ONLY, 0);
	assert_true(info.flags & SR_RING_INFO_OWNER);
	assert_true(info.flags & SR_RING_INFO_COMPLETE);
	assert_string_equal(info.name, ""); /* anonymous */
	/* A caller that knows fewer members gets those only; size unset is refused. */
	{
		sr_ring_info small;

		memset(&small, 0xab, sizeof(small));
		small.size = (uint32_t)offsetof(sr_ring_info, obs_dim);
		assert_int_equal(sr_ring_info_get(r, &small), 0);
		assert_int_equal(small.capacity, 64);
		assert_int_equal(small.obs_dim, 0xabababab); /* beyond its size: untouched */
		small.size = 0;
		assert_int_equal(sr_ring_info_get(r, &small), -EINVAL);
	}
	sr_ring_destroy(r);
	sr_ring_destroy(NULL);
}

static void test_empty_full(void **st)
{
	sr_ring *r = mk(8, 2);
	uint64_t seq, first;

	(void)st;
	assert_int_equal(sr_ring_peek(r, 100, &first), 0);
	assert_int_equal(first, 0);
	assert_int_equal(sr_ring_reserve(r, 0, 0, &seq), -EINVAL);
	assert_int_equal(sr_ring_reserve(r, 9, 0, &seq), -EINVAL);
	assert_int_equal(sr_ring_reserve(r, 8, 0, &seq), 0);
	assert_int_equal(seq, 0);
	/* Reserved but unpublished: not visible, not valid. */
	assert_int_equal(sr_ring_peek(r, 100, &first), 0);
	assert_false(sr_ring_slot_valid(r, 0));
	for (uint64_t s = 0; s < 8; s++)
		fill(r, s);
	/* Full: nothing more until consumed. */
	assert_int_equal(sr_ring_try_reserve(r, 1, 0, &seq), -EAGAIN);
	/* Publish out of order: the consumer sees only the contiguous run. */
	sr_ring_publish(r, 4, 4);
	assert_int_equal(sr_ring_peek(r, 100, &first), 0);
	sr_ring_publish(r, 0, 2);
	assert_int_equal(sr_ring_peek(r, 100, &first), 2);
	sr_ring_publish(r, 2, 2);
	assert_int_equal(sr_ring_peek(r, 100, &first), 8);
	assert_int_equal(sr_ring_peek(r, 3, &first), 3);
	for (uint64_t s = 0; s < 8; s++)
		check(r, s);
	assert_int_equal(sr_ring_try_reserve(r, 1, 0, &seq), -EAGAIN);
	sr_ring_consume(r, 3);
	assert_int_equal(sr_ring_cursor(r), 3);
	assert_int_equal(sr_ring_try_reserve(r, 4, 0, &seq), -EAGAIN);
	assert_int_equal(sr_ring_try_reserve(r, 3, 0, &seq), 0);
	assert_int_equal(seq, 8);
	/* The lapped slots 0..2 are no longer valid; 3.. still are. */
	assert_false(sr_ring_slot_valid(r, 0));
	assert_false(sr_ring_slot_valid(r, 2));
	check(r, 3);
	assert_int_equal(info_of(r).oldest, 3);
	assert_int_equal(sr_ring_head(r), 11);
	sr_ring_destroy(r);
}

static void test_wrap(void **st)
{
	sr_ring *r = mk(16, 3);
	uint64_t seq, first, expect = 0, consumed = 0;

	(void)st;
	/* Many laps with odd sizes: every slot is seen once, in order. */
	for (int round = 0; round < 200; round++) {
		uint32_t n = 1 + (uint32_t)(round * 7 % 5);
		assert_int_equal(sr_ring_reserve(r, n, 0, &seq), 0);
		assert_int_equal(seq, expect);
		for (uint32_t i = 0; i < n; i++)
			fill(r, seq + i);
		sr_ring_publish(r, seq, n);
		expect += n;
		uint32_t got = sr_ring_peek(r, 1 + (uint32_t)(round % 4), &first);
		assert_int_equal(first, consumed);
		for (uint32_t i = 0; i < got; i++)
			check(r, first + i);
		sr_ring_consume(r, got);
		consumed += got;
		/* Drain fully before the ring would block. */
		if (expect - consumed > 10) {
			got = sr_ring_peek(r, 100, &first);
			assert_int_equal(got, expect - consumed);
			sr_ring_consume(r, got);
			consumed += got;
		}
	}
	assert_true(expect > 16 * 10);
	sr_ring_destroy(r);
}

static void test_contig(void **st)
{
	sr_ring *r = mk(16, 1);
	uint64_t seq, first;

	(void)st;
	assert_int_equal(sr_ring_reserve(r, 10, 0, &seq), 0);
	sr_ring_publish(r, seq, 10);
	assert_int_equal(sr_ring_peek(r, 100, &first), 10);
	sr_ring_consume(r, 10);
	/* 6 slots to the lap end: a contiguous 8 pads 6 and starts at 16. */
	assert_int_equal(sr_ring_reserve(r, 8, SR_RESERVE_CONTIG, &seq), 0);
	assert_int_equal(seq, 16);
	assert_int_equal(sr_ring_head(r), 24);
	/* The pad is already published; the range is not. */
	assert_int_equal(sr_ring_peek(r, 100, &first), 6);
	for (uint64_t s = 10; s < 16; s++) {
		assert_true(sr_ring_slot_valid(r, s));
		assert_int_equal(sr_ring_flags_col(r)[s & 15], SR_SLOT_PAD);
		assert_int_equal(sr_ring_prev_col(r)[s & 15], SR_RING_NO_PREV);
	}
	sr_ring_publish(r, seq, 8);
	assert_int_equal(sr_ring_peek(r, 100, &first), 14);
	sr_ring_consume(r, 14);
	/* A contiguous range that fits needs no pad. */
	assert_int_equal(sr_ring_reserve(r, 8, SR_RESERVE_CONTIG, &seq), 0);
	assert_int_equal(seq, 24);
	sr_ring_publish(r, seq, 8);
	sr_ring_consume(r, sr_ring_peek(r, 100, &first));
	/* try + contig where pad + n > capacity: pad goes out alone. */
	assert_int_equal(sr_ring_reserve(r, 4, 0, &seq), 0); /* 32..35 */
	sr_ring_publish(r, seq, 4);
	sr_ring_consume(r, sr_ring_peek(r, 100, &first));
	assert_int_equal(sr_ring_try_reserve(r, 16, SR_RESERVE_CONTIG, &seq), -EAGAIN);
	assert_int_equal(sr_ring_head(r), 48);
	assert_int_equal(sr_ring_peek(r, 100, &first), 12);
	sr_ring_consume(r, 12);
	assert_int_equal(sr_ring_try_reserve(r, 16, SR_RESERVE_CONTIG, &seq), 0);
	assert_int_equal(seq, 48);
	sr_ring_destroy(r);
}

/*
 * R3 by claim: a reservation does not write the seq words, yet the previous lap of the claimed slots
 * reads invalid at once, the rest of the window stays valid, and writers
 * of parts of the range publish them in any order.
 */
static void test_claim_invalidates(void **st)
{
	sr_ring *r = mk(16, 2);
	uint64_t seq, first;

	(void)st;
	assert_int_equal(sr_ring_reserve(r, 16, 0, &seq), 0);
	for (uint64_t s = 0; s < 16; s++)
		fill(r, s);
	sr_ring_publish(r, seq, 16);
	assert_int_equal(sr_ring_peek(r, 100, &first), 16);
	sr_ring_consume(r, 16);
	for (uint64_t s = 0; s < 16; s++)
		assert_true(sr_ring_slot_valid(r, s));
	{
		sr_ring_info info = {.size = sizeof(info)};

		assert_int_equal(sr_ring_info_get(r, &info), 0);
		assert_int_equal(info.oldest, 0);
	}
	assert_int_equal(sr_ring_reserve(r, 8, SR_RESERVE_CONTIG, &seq), 0);
	assert_int_equal(seq, 16);
	/* Claimed: slots 0..7 may be being overwritten; 8..15 are intact. */
	for (uint64_t s = 0; s < 8; s++)
		assert_false(sr_ring_slot_valid(r, s));
	for (uint64_t s = 8; s < 16; s++)
		assert_true(sr_ring_slot_valid(r, s));
	assert_false(sr_ring_slot_valid(r, 16));
	assert_int_equal(sr_ring_peek(r, 100, &first), 0);
	/* Two writers, each publishing its own half, the second half first. */
	for (uint64_t s = seq; s < seq + 8; s++)
		fill(r, s);
	sr_ring_publish(r, seq + 4, 4);
	assert_int_equal(sr_ring_peek(r, 100, &first), 0);
	assert_true(sr_ring_slot_valid(r, 20));
	assert_false(sr_ring_slot_valid(r, 16));
	sr_ring_publish(r, seq, 4);
	assert_int_equal(sr_ring_peek(r, 100, &first), 8);
	assert_int_equal(first, 16);
	for (uint64_t s = 16; s < 24; s++)
		check(r, s);
	for (uint64_t s = 8; s < 16; s++)
		check(r, s);
	sr_ring_consume(r, 8);
	assert_int_equal(sr_ring_reserve(r, 1, 1u << 5, &seq), -EINVAL);
	sr_ring_destroy(r);
}

static void test_named(void **st)
{
	char name[64];
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 2, .act_size = 4, .capacity = 32};
	sr_ring *r = NULL, *a = NULL, *b = NULL;
	uint64_t seq;

	(void)st;
	snprintf(name, sizeof(name), "sr-test-ring-%d", (int)getpid());
	o.name = name;
	assert_int_equal(sr_ring_create(&o, &r), 0);
	/* Taken name. */
	assert_int_equal(sr_ring_create(&o, &b), -EEXIST);
	/* "/name" and "name" are the same segment. */
	char slash[70];
	snprintf(slash, sizeof(slash), "/%s", name);
	assert_int_equal(sr_ring_attach(slash, 0, &a), 0);
	assert_true(info_of(a).flags & SR_RING_INFO_READ_ONLY);
	assert_int_equal(sr_ring_capacity(a), 32);
	/* The segment as a listing sees it, without mapping it. */
	{
		sr_ring_info pi = {.size = sizeof(pi)};

		assert_int_equal(sr_ring_probe(name, &pi), 0);
		assert_int_equal(pi.kind, SR_SEGMENT_RING);
		assert_int_equal(pi.version, SR_RING_FORMAT_VERSION);
		assert_int_equal(pi.capacity, 32);
		assert_true(pi.flags & SR_RING_INFO_ALIVE);
		assert_true(pi.flags & SR_RING_INFO_COMPLETE);
		assert_int_equal(pi.creator_pid, getpid());
		assert_string_equal(pi.name, slash);
		assert_string_equal(info_of(a).name, slash);
		assert_int_equal(sr_ring_probe("sr-test-ring-no-such", &pi), -ENOENT);
		assert_int_equal(sr_ring_probe("a/b", &pi), -EINVAL);
	}
	assert_int_equal(sr_ring_reserve(a, 1, 0, &seq), -EPERM);
	assert_int_equal(sr_ring_reserve(r, 2, 0, &seq), 0);
	fill(r, 0);
	fill(r, 1);
	sr_ring_publish(r, 0, 2);
	check(a, 0);
	check(a, 1);
	assert_int_equal(sr_ring_head(a), 2);
	sr_ring_destroy(a);
	/* The creator unlinks on destroy. */
	sr_ring_destroy(r);
	assert_int_equal(sr_ring_attach(name, 0, &a), -ENOENT);
	assert_int_equal(sr_ring_unlink(name), -ENOENT);
	assert_int_equal(sr_ring_attach("", 0, &a), -EINVAL);
	assert_int_equal(sr_ring_attach("a/b", 0, &a), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),  cmocka_unit_test(test_empty_full),
		cmocka_unit_test(test_wrap),      cmocka_unit_test(test_contig),
		cmocka_unit_test(test_named),     cmocka_unit_test(test_claim_invalidates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
