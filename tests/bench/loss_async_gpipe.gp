# loss_async_gpipe.gp: last-stage training loss vs tokens, async vs gpipe swarm.
# gnuplot -e "dir='DATA_DIR'; out='FILE.png'" loss_async_gpipe.gp
# (dir holds lg_async.dat and lg_gpipe.dat: "tokens loss" per line)
set terminal pngcairo size 800,500 font "sans,11"
set output out
set title "Training loss vs tokens: async 1F1B vs gpipe (gpt-tiny, 4-stage swarm)"
set xlabel "tokens"
set ylabel "training loss (running mean of 10 updates)"
set grid
set key top right
plot dir."/lg_async.dat" using 1:2 with lines lw 2 title "async (weight stashing)", \
     dir."/lg_gpipe.dat" using 1:2 with lines lw 2 title "gpipe (flush)"
