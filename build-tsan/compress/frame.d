build-tsan/compress/frame.o: compress/frame.c compress/codec.h \
 compress/quant.h
compress/codec.h:
compress/quant.h:
