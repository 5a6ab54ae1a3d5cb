set terminal pngcairo size 900,560
set grid
set key left top
set output 'docs/plots/pagerank_edges_per_s.png'
set title 'PageRank: edges/s per iteration'
set logscale xy
set xlabel 'edges'
set ylabel 'edges/s'
plot for [c in 'cpu-host-loop cpu-1-actor cpu-2-actors-k2k'] '< grep "^'.c.' " docs/plots/pagerank.dat' using 2:3 with linespoints title c
unset logscale
set output 'docs/plots/anomaly_latency_cdf.png'
set title 'Anomaly detection: reading -> verdict latency CDF'
set logscale x
set xlabel 'latency (us)'
set ylabel 'fraction of readings'
set key right bottom
plot 'docs/plots/latency_cdf.dat' index 0 with linespoints title 'streaming (ring kernels), paced', '' index 1 with linespoints title 'batch (fixed windows), paced'
