// train_args.c: flags, then the DeepSpeed file, then the checks (train_args.h).
#include "train_args.h"

#include <stdio.h>
#include <stdlib.h>

#include "ds_config.h"

void train_args_parse(TrainConfig *c, int argc, char **argv, const char *flavour) {
    if (train_config_parse_flags(c, argc, argv, flavour)) {
        train_config_usage(argv[0], flavour);
        if (train_config_has_zero(flavour)) {
            printf("\nKeys --deepspeed FILE reads (DeepSpeed's names; each sets what its flag sets):\n");
            ds_config_usage(stdout, "  ");
        }
        exit(0);
    }
    // the file's values fill in what the flags left alone, before the checks (it may set -z)
    if (c->deepspeed && ds_config_apply(c, c->deepspeed, stderr) != 0) exit(1);
    train_config_check(c, flavour);
}
