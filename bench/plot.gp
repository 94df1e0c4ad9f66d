# Gather throughput per backend and workload, from the table bench/run
# makes out of `zrbench --tsv`: one line per row (backend, then the four
# workloads' gather MiB/s, "-" where a row does not run), a header line of
# column names. Called as
#   gnuplot -e "data='FILE'; out='PNG'; subtitle='TEXT'" bench/plot.gp
set terminal pngcairo size 1500,760 font "DejaVu Sans,11"
set output out
set datafile separator "\t"
set datafile missing "-"
set title "Logical gather throughput, batch 256, warm page cache\n{/*0.8 ".subtitle."}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [1:*]
set ylabel "MiB/s (log scale)"
set grid ytics mytics
set xtics rotate by -40 left nomirror
set key top right
plot data using 2:xtic(1) title columnheader(2), \
     '' using 3 title columnheader(3), \
     '' using 4 title columnheader(4), \
     '' using 5 title columnheader(5)
