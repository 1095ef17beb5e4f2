# The summary of bench/compare-etcd.sh's rounds (sourced by it, and by
# bench/compare_test.go): round K's results are DIR/etcd-K.json and
# DIR/perpd-K.json, as `perpd bench http --out` writes them.

# The first okPerSec/p99Ms/count/ok of a result are its measured requests.
field() { sed -n "s/^ *\"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$1" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# median_round DIR ROUNDS prints the median round of rounds 1..ROUNDS, the
# round of the median perpd/etcd rate ratio (the lower middle of an even
# count), and that round's figures: "round etcdOkPerSec etcdP99Ms
# perpdOkPerSec perpdP99Ms rateRatio p99Ratio". Every figure is that one
# round's: medians taken column by column mixed rounds, so the printed
# rates did not make the printed ratio (run 59: 5,819 / 3,436 beside
# 1.73x).
median_round() {
	local dir=$1 rounds=$2 k er ep pr pp
	for k in $(seq 1 "$rounds"); do
		er=$(field "$dir/etcd-$k.json" okPerSec) ep=$(field "$dir/etcd-$k.json" p99Ms)
		pr=$(field "$dir/perpd-$k.json" okPerSec) pp=$(field "$dir/perpd-$k.json" p99Ms)
		printf '%s %s %s %s %s %s\n' "$(awk -v a="$pr" -v b="$er" 'BEGIN { printf "%.9g", (b > 0 ? a / b : 0) }')" \
			"$k" "$er" "$ep" "$pr" "$pp"
	done | sort -g -k1,1 -k2,2n | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }' | {
		read -r _ k er ep pr pp
		printf '%s %s %s %s %s %s %s\n' "$k" "$er" "$ep" "$pr" "$pp" "$(ratio "$pr" "$er")" "$(ratio "$pp" "$ep")"
	}
}
