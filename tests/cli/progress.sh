#!/bin/bash
# The progress meter appears on a terminal (records done of the total,
# MiB/s), and never when stderr is a file or with -q.
. "${srcdir:-.}/tests/cli/lib.sh"
command -v script >/dev/null || fail "script(1) from util-linux is needed to give zr a terminal"

py 'np.save("a.npy", np.arange(3000 * 16, dtype="<f4").reshape(3000, 16))'

script -qec "'$ZR' import tty a.npy" /dev/null >tty.txt
grep -q 'zr import: 3000/3000 records, [0-9.]* MiB/s' tty.txt || fail "no progress on a terminal: $(cat -A tty.txt)"
script -qec "'$ZR' export tty out.npy -q" /dev/null >quiet.txt
[ ! -s quiet.txt ] || fail "progress despite -q: $(cat -A quiet.txt)"
"$ZR" import file a.npy 2>err.txt
[ ! -s err.txt ] || fail "progress on a file: $(cat -A err.txt)"
py 'assert np.array_equal(np.load("out.npy"), np.load("a.npy"))'

# compact, verify and train-dict report through the library's callback.
"$ZR" delete tty 0 1 2 >/dev/null
script -qec "'$ZR' compact tty" /dev/null >compact.txt
grep -q 'zr compact: 2997/2997 records' compact.txt || fail "no compact progress: $(cat -A compact.txt)"
script -qec "'$ZR' verify tty" /dev/null >verify.txt
grep -q 'zr verify: 2997/2997 records' verify.txt || fail "no verify progress: $(cat -A verify.txt)"
script -qec "'$ZR' train-dict tty --tier fast -o d.bin" /dev/null >train.txt
grep -q 'zr train-dict: [0-9]*/[0-9]* sample records' train.txt || fail "no train-dict progress: $(cat -A train.txt)"
script -qec "'$ZR' verify tty -q" /dev/null >quiet2.txt
grep -q 'records' quiet2.txt && fail "verify progress despite -q: $(cat -A quiet2.txt)"
exit 0
