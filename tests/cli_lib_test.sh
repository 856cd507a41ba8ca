#!/usr/bin/env bash
# The assertions of cli_lib.sh: each passes on what it expects, and on
# anything else fails, counts, and prints what was expected and what came.
# usage: cli_lib_test.sh
# shellcheck disable=SC2016 # the cases are code for another shell
set -u
LIB=$(dirname "$0")/cli_lib.sh
# shellcheck source=cli_lib.sh
. "$LIB"

# case WANT_FAILS WHAT 'SHELL CODE' [TEXT...]: the code, run in a fresh
# shell that sourced cli_lib.sh, makes WANT_FAILS assertions fail, and its
# output holds every TEXT (a fixed string).
case_() {
	local want=$1 what=$2 code=$3
	shift 3
	bash -c ". '$LIB'; $code"$'\n''echo "fails=$fails"; echo "counted=$(failures)"; trap - EXIT; rm -rf "$T"' \
		>"$T/case" 2>&1
	expect_line -x "$what: the failures counted" "fails=$want" "$T/case" || return
	expect_line -x "$what: the failures recorded" "counted=$want" "$T/case" || return
	local t
	for t in "$@"; do
		expect_line -F "$what: the output says '$t'" "$t" "$T/case"
	done
}

case_ 0 "expect_rc, the status expected" 'expect_rc 3 "exit 3" sh -c "exit 3"' "ok: exit 3 (exit 3)"
case_ 1 "expect_rc, another status" 'expect_rc 0 "echo" sh -c "echo out; echo err >&2; exit 2"' \
	"FAIL: echo: exit 2, expected 0" "stdout: out" "stderr: err"
case_ 0 "expect_rc with --" 'expect_rc 0 "true" -- true'
case_ 0 "run keeps the streams" 'run sh -c "echo a; echo b >&2; exit 4"; expect_eq rc 4 "$rc";
	expect_eq out a "$(cat "$T/out")"; expect_eq err b "$(cat "$T/err")"; expect_lines all 2 "$T/all"'
case_ 0 "expect_line, a match (stdin)" 'printf "x\nabc 12\n" | expect_line "m" "^abc [0-9]*$"'
case_ 0 "expect_line, a match (file)" 'echo "a(b)" >"$T/f"; expect_line "m" "a(b)" "$T/f"'
case_ 1 "expect_line, no match" 'printf "one\ntwo\n" | expect_line "m" "^three"' \
	"FAIL: m: expected a line matching '^three', got:" "got: one" "got: two"
case_ 1 "expect_line, nothing at all" 'expect_line "m" "x" </dev/null' "got: (nothing)"
case_ 0 "expect_line -E" 'echo "ab" | expect_line -E "m" "^(a|c)b$"'
case_ 1 "expect_line -E, basic syntax not taken" 'echo "ab" | expect_line "m" "^(a|c)b$"'
case_ 0 "expect_line -F" 'echo "a.*b" | expect_line -F "m" ".*"'
case_ 1 "expect_line -x" 'echo "okay" | expect_line -x "m" "ok"' "(grep -x)"
case_ 0 "expect_line, a pattern starting with -" 'echo "--policy" | expect_line "m" "--policy"'
case_ 1 "expect_line, a missing file" 'expect_line "m" "x" "$T/none"' "got: (nothing)"
case_ 0 "expect_no_line, none" 'printf "a\nb\n" | expect_no_line "m" "^c"'
case_ 1 "expect_no_line, one" 'printf "a\nbad line\n" | expect_no_line "m" "bad"' \
	"FAIL: m: expected no line matching 'bad', got:" "got: bad line"
case_ 0 "expect_eq" 'expect_eq "m" 1f2e "1f2e"'
case_ 1 "expect_eq, different" 'expect_eq "hash" aaaa bbbb' "FAIL: hash: expected 'aaaa', got 'bbbb'"
case_ 0 "expect_ne" 'expect_ne "m" a b'
case_ 1 "expect_ne, equal" 'expect_ne "seed" a a' "FAIL: seed: expected anything but 'a', got it"
case_ 0 "expect_lines" 'printf "1\n2\n3\n" | expect_lines "m" 3'
case_ 1 "expect_lines, other count" 'printf "1\n2\n" | expect_lines "rows" 3' \
	"FAIL: rows: expected 3 line(s), got 2:" "got: 2"
case_ 0 "expect_num" 'expect_num a 0.8 ">=" 0.7; expect_num b -60 "<=" -50; expect_num c 5 "<" 4.5e1;
	expect_num d 2 "==" 2.0; expect_num e 1 "!=" 2; expect_num f 3 ">" 2'
case_ 1 "expect_num, false" 'expect_num "landed" 0.42 ">=" 0.7' "FAIL: landed: expected 0.42 >= 0.7"
case_ 1 "expect_num, not a number" 'expect_num "n" "" ">" 0' "FAIL: n: expected  > 0"
case_ 1 "expect_num, unknown operator" 'expect_num "n" 1 "=~" 1'
case_ 0 "expect_one_error" 'run sh -c "echo \"stepring: bad --n\" >&2; exit 2";
	expect_one_error "m" "bad --n"'
case_ 1 "expect_one_error, two lines" 'run sh -c "printf \"stepring: a\nstepring: b\n\" >&2";
	expect_one_error "m"' "FAIL: m: expected one 'stepring: ' line on stderr, got:" "stderr: stepring: b"
case_ 1 "expect_one_error, no prefix" 'run sh -c "echo oops >&2"; expect_one_error "m"'
case_ 1 "expect_one_error, another text" 'run sh -c "echo \"stepring: x\" >&2"; expect_one_error "m" "y"' \
	"expected the error to mention 'y', got: stepring: x"
case_ 0 "expect_exit" 'expect_exit 1 false' "ok: false (exit 1)"
case_ 1 "expect_exit, another status" 'expect_exit 0 false' "FAIL: false: exit 1, expected 0"
case_ 0 "expect_usage_error" 'expect_usage_error sh -c "echo \"stepring: no\" >&2; exit 2"'
case_ 1 "expect_usage_error, exit 1" 'expect_usage_error sh -c "echo \"stepring: no\" >&2; exit 1"' \
	"exit 1, expected 2"
case_ 1 "expect_usage_error, stdout too" 'expect_usage_error sh -c "echo out; echo \"stepring: no\" >&2; exit 2"' \
	"stdout: expected 0 line(s), got 1:"
case_ 0 "expect_golden, equal" 'GOLDEN=$T; echo a >"$T/g"; echo a >"$T/x"; expect_golden g "$T/x"' \
	"ok: g: as the golden file"
case_ 1 "expect_golden, different" 'GOLDEN=$T; echo a >"$T/g"; echo b >"$T/x"; expect_golden g "$T/x"' \
	"FAIL: g: differs from the golden file" "-a" "+b"
case_ 0 "expect_golden, UPDATE=1" 'GOLDEN=$T; echo a >"$T/g"; echo b >"$T/x"; UPDATE=1 expect_golden g "$T/x";
	expect_eq "rewritten" b "$(cat "$T/g")"'
case_ 2 "fail counts and goes on" 'fail one; fail two' "FAIL: one" "FAIL: two"
case_ 1 "a failure in a subshell is recorded" '( fail inner ); fails=1' "FAIL: inner"

# finish, die and skip end the script with 0, 1 and 77; the scratch
# directory and the script's cleanup go with it.
bash -c ". '$LIB'; echo \"\$T\" >'$T/dir'; cleanup() { echo cleaned; }; finish" >"$T/o" 2>&1
expect_eq "finish without failures: status" 0 $?
expect_line "finish runs cleanup" "^cleaned$" "$T/o"
[ ! -d "$(cat "$T/dir")" ] || fail "finish: expected the scratch directory removed, it is still there"
bash -c ". '$LIB'; fail x; finish" >"$T/o" 2>&1
expect_eq "finish after a failure: status" 1 $?
expect_line "finish counts" "1 failure(s)" "$T/o"
bash -c ". '$LIB'; echo a | expect_line m b; (fail c); x=\$(fail d); finish" >"$T/o" 2>&1
expect_eq "finish after failures in a pipeline and subshells: status" 1 $?
expect_line "finish counts them all" "3 failure(s)" "$T/o"
bash -c ". '$LIB'; die gone; echo after" >"$T/o" 2>&1
expect_eq "die: status" 1 $?
expect_no_line "die ends at once" "^after$" "$T/o"
bash -c ". '$LIB'; skip none here; echo after" >"$T/o" 2>&1
expect_eq "skip: status" 77 $?
expect_line "skip says why" "^SKIP: none here$" "$T/o"
finish
