#!/usr/bin/env python3
"""Write envs/np_ziggurat.c: the tables of NumPy's 256-level ziggurat for
Generator.standard_normal (NumPy's random_standard_normal; BSD-3-Clause),
as the running NumPy uses them.

NumPy's tables were computed once, with the float64 arithmetic of the
machine that made them (a recurrence over 254 layers), and cannot be
recomputed to the bit elsewhere. So this script measures them from NumPy's
own standard_normal: it sets a PCG64 state whose next outputs are chosen
words (the LCG is invertible: state = (target - inc) / multiplier mod 2^128,
and the XSL-RR output of a chosen 128-bit state is chosen through its low
half), calls standard_normal(), and reads the table entries off what comes
back and how many words it drew:

  - wi[i]: the draw with layer i and |x| bits 1 returns 1 * wi[i] (layer 1,
    whose fast test always fails, returns it through the wedge test with a
    second word of 0);
  - ki[i]: the least |x| bits of layer i that no longer return at once (a
    binary search over 52 bits; a return at once draws one word, a miss
    draws more);
  - fi[i] = exp(-x_i^2 / 2) at the layer's edge x_i = wi[i] * 2^52 (fi[0] =
    1), checked against NumPy's wedge test: with the wedge's uniform at 0
    and at its largest value, the |x| bits where NumPy's answer flips are
    found by binary search in every layer and the tables written here must
    flip at the same place.

    /usr/bin/python3 tools/gen_ziggurat.py > envs/np_ziggurat.c
"""
import math
import sys

import numpy as np

MULT = (2549297995355413924 << 64) | 4865540595714422341
MOD = 1 << 128
MULT_INV = pow(MULT, -1, MOD)
TWO52 = 2.0 ** 52

bg = np.random.PCG64(0)
gen = np.random.Generator(bg)


def state_for(out, hi):
    """A 128-bit PCG64 state whose XSL-RR output is @out (rotation 0)."""
    hi &= (1 << 58) - 1
    return (hi << 64) | (hi ^ out)


def arrange(first, second=None):
    """Make the next draws @first (and @second): returns (state, inc) of the first."""
    s1 = state_for(first, 0x0123456789abcdef)
    inc = (0x5851f42d4c957f2d << 64 | 0x14057b7ef767814f) | 1
    if second is not None:
        for flip in range(2):  # the increment must be odd
            s2 = state_for(second, 0x00fedcba98765432 ^ flip)
            inc = (s2 - s1 * MULT) % MOD
            if inc & 1:
                break
    bg.state = {"bit_generator": "PCG64",
                "state": {"state": ((s1 - inc) * MULT_INV) % MOD, "inc": inc},
                "has_uint32": 0, "uinteger": 0}
    return s1, inc


def draws(s1, inc):
    """How many words standard_normal() drew since arrange() (1 = returned at once)."""
    now = bg.state["state"]["state"]
    n, s = 1, s1
    while s != now:
        s = (s * MULT + inc) % MOD
        n += 1
        if n > 64:
            raise RuntimeError("lost track of the PCG64 stream")
    return n


def normal_with(rabs, idx, second=None):
    s1, inc = arrange((rabs << 9) | idx, second)
    x = gen.standard_normal()
    return x, draws(s1, inc)


def measure():
    wi, ki = [], []
    for idx in range(256):
        x, _ = normal_with(1, idx, 0)
        wi.append(x)
        lo, hi = 0, 1 << 52  # returns at once below ki[idx]
        if normal_with(0, idx)[1] != 1:
            ki.append(0)
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if normal_with(mid, idx)[1] == 1:
                lo = mid
            else:
                hi = mid
        ki.append(hi)
    fi = [1.0] + [math.exp(-0.5 * (w * TWO52) * (w * TWO52)) for w in wi[1:]]
    return ki, wi, fi


def check_wedges(ki, wi, fi):
    """NumPy's wedge test flips where these tables flip, in every layer, for the
    wedge's uniform at 0 and at (2^53 - 1) / 2^53."""
    for word, u in ((0, 0.0), ((1 << 64) - 1, ((1 << 64) - 1 >> 11) * 2.0 ** -53)):
        for idx in range(1, 256):
            def ours(rabs):
                x = rabs * wi[idx]
                return (fi[idx - 1] - fi[idx]) * u + fi[idx] < math.exp(-0.5 * x * x)

            def numpy_accepts(rabs):
                return normal_with(rabs, idx, word)[1] == 2

            lo, hi = max(ki[idx], 1), (1 << 52) - 1
            a_lo, a_hi = numpy_accepts(lo), numpy_accepts(hi)
            if a_lo != ours(lo) or a_hi != ours(hi):
                raise RuntimeError("wedge test of layer %d differs at its ends" % idx)
            if not a_lo or a_hi:
                continue
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if numpy_accepts(mid):
                    lo = mid
                else:
                    hi = mid
            if not (ours(lo) and not ours(hi)):
                raise RuntimeError("wedge test of layer %d flips elsewhere" % idx)


def main():
    ki, wi, fi = measure()
    check_wedges(ki, wi, fi)
    r = wi[255] * TWO52
    if r != 3.6541528853610088 or 1.0 / r != 0.27366123732975828:
        raise RuntimeError("the tail's r is not the last layer's edge")
    out = sys.stdout
    out.write("/*\n * The tables of NumPy's 256-level ziggurat for standard_normal\n"
              " * (numpy/random/src/distributions, BSD-3-Clause, Copyright (c) 2005-2022\n"
              " * NumPy Developers), measured from NumPy %s's own draws by\n"
              " * tools/gen_ziggurat.py (generated: do not edit). Hex floats: exact.\n"
              " * Used by sr_np_standard_normal (np_random.h).\n */\n" % np.__version__)
    out.write("#include <stdint.h>\n\n#include \"np_random.h\"\n\n")
    out.write("const uint64_t sr__np_zig_ki[256] = {\n")
    for i in range(0, 256, 3):
        out.write("\t" + " ".join("0x%013xull," % k for k in ki[i:i + 3]) + "\n")
    out.write("};\n\n")
    for name, tab in (("wi", wi), ("fi", fi)):
        out.write("const double sr__np_zig_%s[256] = {\n" % name)
        for i in range(0, 256, 3):
            out.write("\t" + " ".join("%s," % float(v).hex() for v in tab[i:i + 3]) + "\n")
        out.write("};\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
