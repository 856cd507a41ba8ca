# shellcheck shell=bash
# What the CLI test scripts share (cli_*.sh, mpi_*.sh, install_consumer.sh
# source it): a scratch directory, one way to run a command, and assertions
# that say what was expected and what came. A failed assertion prints
# "FAIL: ..." and counts; the script goes on, so one run reports every
# failure, and ends with `finish` (exit 1 if anything failed). `die` ends
# at once, for a failure that leaves nothing else to check; `skip` exits 77.
#
#   T                             scratch directory, removed at exit (and
#                                 `cleanup`, if the script defines one, runs)
#   run CMD...                    stdout in $T/out, stderr in $T/err, both in
#                                 $T/all (stdout first), status in $rc (returned)
#   expect_rc RC WHAT [--] CMD... run CMD, check its status; prints "ok: WHAT"
#   expect_exit RC CMD...         the same, WHAT being the command
#   expect_usage_error CMD...     exit 2, one "stepring: " line on stderr,
#                                 nothing on stdout
#   expect_line [-E|-F|-x|-w|-i] WHAT PATTERN [FILE]
#                                 a line of FILE (default: stdin) matches
#                                 PATTERN (grep's syntax: basic unless -E/-F)
#   expect_no_line [opts] WHAT PATTERN [FILE]   no line matches
#   expect_eq WHAT WANT GOT       the strings are equal
#   expect_ne WHAT NOT GOT        GOT is anything but NOT
#   expect_lines WHAT N [FILE]    FILE (default: stdin) has N lines
#   expect_num WHAT A OP B        A OP B as numbers (awk: < <= == != >= >)
#   expect_one_error WHAT [TEXT]  after run/expect_rc: stderr is one line
#                                 "stepring: ..." (naming TEXT, a basic regex)
#   expect_golden NAME FILE       FILE equals $GOLDEN/NAME (UPDATE=1 rewrites it)
#   ok MSG, fail MSG, die MSG, skip MSG, finish, failures (the count so far)
#
# An assertion may end a pipeline (`cmd | expect_line ...`): lastpipe runs
# it in the script's shell. Failures are also written to $T/.fails, so that
# one made in a subshell (`( ... )`, `$( ... )`) still counts at finish.

shopt -s lastpipe
fails=0
T=$(mktemp -d "${TMPDIR:-/tmp}/sr-cli-$$-XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
: >"$T/.fails"
_cl_exit() {
	if declare -F cleanup >/dev/null; then
		cleanup
	fi
	rm -rf "$T"
}
trap _cl_exit EXIT

ok() { echo "ok: $*"; }

fail() {
	echo "FAIL: $*"
	echo "$*" >>"$T/.fails"
	fails=$((fails + 1))
}

failures() { wc -l <"$T/.fails"; }

die() {
	fail "$@"
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit 77
}

finish() {
	local n
	n=$(failures)
	if [ "$n" -ne 0 ]; then
		echo "${0##*/}: $n failure(s)"
		exit 1
	fi
	echo "${0##*/}: all ok"
	exit 0
}

# _show LABEL FILE: FILE's first 20 lines, indented under LABEL.
_show() {
	if [ ! -s "$2" ]; then
		echo "  $1: (nothing)"
		return
	fi
	head -n 20 "$2" | sed "s/^/  $1: /"
	local n
	n=$(wc -l <"$2")
	[ "$n" -le 20 ] || echo "  $1: ... ($n lines)"
}

run() {
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	cat "$T/out" "$T/err" >"$T/all"
	return $rc
}

expect_rc() {
	local want=$1 what=$2
	shift 2
	[ "${1:-}" = "--" ] && shift
	run "$@"
	if [ "$rc" -ne "$want" ]; then
		fail "$what: exit $rc, expected $want ($*)"
		_show stdout "$T/out"
		_show stderr "$T/err"
		return 1
	fi
	ok "$what (exit $rc)"
	return 0
}

expect_exit() {
	expect_rc "$1" "${*:2}" "${@:2}"
}

expect_usage_error() {
	expect_rc 2 "$*" "$@" || return
	expect_one_error "$*" || return
	expect_lines "$*: stdout" 0 "$T/out"
}

# _grep_args: split [grep options] WHAT PATTERN [FILE] into _go, _what,
# _pat and _src (a file; stdin is copied into $T/.in).
_grep_args() {
	_go=()
	while [[ ${1:-} =~ ^-[EFxwi]+$ ]]; do
		_go+=("$1")
		shift
	done
	_what=$1 _pat=$2
	if [ $# -ge 3 ]; then
		_src=$3
	else
		cat >"$T/.in"
		_src=$T/.in
	fi
}

expect_line() {
	local _go _what _pat _src
	_grep_args "$@"
	if grep -q "${_go[@]}" -- "$_pat" "$_src" 2>/dev/null; then
		return 0
	fi
	fail "$_what: expected a line matching '$_pat'${_go[*]:+ (grep ${_go[*]})}, got:"
	_show got "$_src"
	return 1
}

expect_no_line() {
	local _go _what _pat _src
	_grep_args "$@"
	if ! grep -q "${_go[@]}" -- "$_pat" "$_src" 2>/dev/null; then
		return 0
	fi
	fail "$_what: expected no line matching '$_pat'${_go[*]:+ (grep ${_go[*]})}, got:"
	grep "${_go[@]}" -- "$_pat" "$_src" >"$T/.match"
	_show got "$T/.match"
	return 1
}

expect_eq() {
	[ "$2" = "$3" ] && return 0
	fail "$1: expected '$2', got '$3'"
	return 1
}

expect_ne() {
	[ "$2" != "$3" ] && return 0
	fail "$1: expected anything but '$2', got it"
	return 1
}

expect_lines() {
	local what=$1 want=$2 src=${3:-} n
	if [ -z "$src" ]; then
		cat >"$T/.in"
		src=$T/.in
	fi
	n=$(wc -l <"$src")
	[ "$n" -eq "$want" ] && return 0
	fail "$what: expected $want line(s), got $n:"
	_show got "$src"
	return 1
}

expect_num() {
	if awk -v a="$2" -v b="$4" -v op="$3" 'BEGIN {
		if (a !~ /^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$/ || b !~ /^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$/)
			exit 1
		a += 0; b += 0
		if (op == "<") r = a < b
		else if (op == "<=") r = a <= b
		else if (op == "==") r = a == b
		else if (op == "!=") r = a != b
		else if (op == ">=") r = a >= b
		else if (op == ">") r = a > b
		else r = 0
		exit !r }'; then
		return 0
	fi
	fail "$1: expected $2 $3 $4 (as numbers)"
	return 1
}

expect_one_error() {
	local what=$1 text=${2:-}
	if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -q '^stepring: ' "$T/err"; then
		fail "$what: expected one 'stepring: ' line on stderr, got:"
		_show stderr "$T/err"
		return 1
	fi
	if [ -n "$text" ] && ! grep -q -- "$text" "$T/err"; then
		fail "$what: expected the error to mention '$text', got: $(cat "$T/err")"
		return 1
	fi
	return 0
}

expect_golden() {
	local name=$1 file=$2
	if [ "${UPDATE:-0}" = 1 ]; then
		cp "$file" "$GOLDEN/$name"
		echo "updated $GOLDEN/$name"
		return 0
	fi
	if diff -u "$GOLDEN/$name" "$file" >"$T/.diff"; then
		ok "$name: as the golden file"
		return 0
	fi
	fail "$name: differs from the golden file (expected: -, got: +; UPDATE=1 rewrites it):"
	cat "$T/.diff"
	return 1
}
