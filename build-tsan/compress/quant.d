build-tsan/compress/quant.o: compress/quant.c compress/quant.h
compress/quant.h:
