/* main.c: the `brigade` command line. */
#include "node/cli/cli.h"
#include "compress/cpu.h"
#include "net/wire.h"
#include "node/engine/gemm.h"
#include "node/runtime/options.h"
#include "version.h"   /* BRIGADE_VERSION, written by the Makefile */
#include <stdio.h>
#include <string.h>

static void s_usage(FILE *f)
{
    fprintf(f,
        "brigade: train one neural network across volunteer machines.\n\n"
        "usage: brigade COMMAND [options]   (brigade COMMAND --help, or brigade help COMMAND, for its options)\n\n"
        "commands:\n"
        "  solo    [model/data/train options]     the whole model in one process (the reference)\n"
        "  node    [--listen H:P] [--join H:P/KEY] [--stage auto|N] [options]\n"
        "                                         serve one pipeline stage of a swarm\n"
        "  keygen  --out DIR                      make a lasting node identity\n"
        "  status  HOST:PORT/KEY                  the swarm map: stages, peers, rates, loss\n"
        "  sample  --model-file F [--prompt S]    generate text from a trained gpt\n"
        "  assemble CHECKPOINT_DIR... --out FILE  stage checkpoints -> one model file\n"
        "  eval    --model-file F --data SPEC     held-out loss of a model file (brigade's, safetensors, llm.c)\n"
        "  export  MODEL_FILE --format safetensors|llmc --out FILE   a model for PyTorch or llm.c\n"
        "  ticket  --owner DIR --peer PUBKEY [--expires T]   admission ticket for a closed swarm\n"
        "  sim     --nodes N --stages K [options] a whole swarm in one process, on a virtual network and clock\n"
        "  version                                this build: release, wire protocol, kernels in use\n"
        "\nenvironment:\n"
        "  BRIGADE_CPU=generic|sse4.1|avx2|avx512|native   caps the instruction set of the fast kernels\n"
        "                                         (default native: the best this CPU runs; generic: plain C)\n"
        "  BRIGADE_GEMM=own|blas                  matrix products: brigade's own AVX-512 kernel (the default\n"
        "                                         where the CPU has AVX-512) or OpenBLAS's\n"
        "\ntrainer options (solo):\n");
    opts_help(f, OPTS_SOLO);
}

/* `brigade version`: what a volunteer reports, and what decides whether two
 * nodes can talk (the wire protocol). */
static int s_version(void)
{
    printf("brigade %s\n", BRIGADE_VERSION);
    printf("wire protocol %d\n", WIRE_VERSION);
    printf("kernels %s (this CPU: %s), matrix products %s\n", cpu_level_name(cpu_level()),
           cpu_level_name(cpu_hw_level()), gemm_name());
    return 0;
}

/* Runs command argv[1] (checked for the environment's kernel choices first). */
static int s_command(int argc, char **argv)
{
    char err[160];
    if (cpu_env_check(err, sizeof err) < 0 || gemm_env_check(err, sizeof err) < 0) return cli_fail(err);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: brigade version\n"
                   "  prints this build's release, the wire protocol it speaks and the kernels it runs here\n");
            return 0;
        }
        if (argc > 2) {
            snprintf(err, sizeof err, "version takes no options, not '%.60s'", argv[2]);
            return cli_fail(err);
        }
        return s_version();
    }
    if (!strcmp(cmd, "solo")) return cmd_solo(argc, argv);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc, argv);
    if (!strcmp(cmd, "node")) return cmd_node(argc, argv);
    if (!strcmp(cmd, "keygen")) return cmd_keygen(argc, argv);
    if (!strcmp(cmd, "status")) return cmd_status(argc, argv);
    if (!strcmp(cmd, "assemble")) return cmd_assemble(argc, argv);
    if (!strcmp(cmd, "ticket")) return cmd_ticket(argc, argv);
    if (!strcmp(cmd, "sim")) return cmd_sim(argc, argv);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc, argv);
    if (!strcmp(cmd, "export")) return cmd_export(argc, argv);
    snprintf(err, sizeof err, "unknown command '%.60s' (see brigade --help)", cmd);
    return cli_fail(err);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "brigade: no command given: solo, node, keygen, status, sample, assemble, eval, export, ticket, sim or "
                        "version (see brigade --help)\n");
        return 2;
    }
    int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help");
    if (help && argc == 3 && strcmp(argv[2], "--help") && strcmp(argv[2], "-h") && strcmp(argv[2], "help")) {
        char flag[] = "--help", *sub[] = { argv[0], argv[2], flag, NULL };   /* brigade help COMMAND: its --help */
        return s_command(3, sub);
    }
    if (help) {
        s_usage(stdout);
        return 0;
    }
    return s_command(argc, argv);
}
