// model_diff: compares two llm.c model files tensor by tensor.
//   model_diff A.bin B.bin [tolerance]
// Prints each tensor's max |a-b| and relative L2 error ||a-b|| / ||a||, then the same
// over the whole model, then the verdict line, "equal within tolerance" or "differ".
// Equal: bit-identical, or a whole-model relative error <= tolerance > 0 (default 0: only
// bit-identical files are equal). Exit status: 0 equal, 1 differ (different shapes too),
// 2 bad usage (a tolerance that is not a non-negative number). (Per-tensor figures of
// tensors that start at zero, like biases, are large relative errors of tiny values, hence
// the whole-model test.)
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/model/gpt2_config.h"
#include "../../llmc/model/gpt2_model_file.h"

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s A.bin B.bin [relative tolerance, default 0 = identical]\n", argv[0]);
        return 2;
    }
    double tol = 0.0;
    if (argc == 4) {
        // plain digits first: no sign, space, inf or nan
        const char *t = argv[3];
        char *end = (char *)t;
        if (isdigit((unsigned char)t[0]) || t[0] == '.') tol = strtod(t, &end);
        if (end == t || *end != '\0' || !isfinite(tol) || !(tol >= 0.0)) {
            fprintf(stderr, "error: tolerance '%s' is not a non-negative number (a relative L2 error such as 1e-5; "
                    "0 = bit-identical only)\n", argv[3]);
            return 2;
        }
    }
    GPT2Config ca, cb;
    float *a = gpt2_model_file_read(argv[1], &ca);
    float *b = gpt2_model_file_read(argv[2], &cb);
    if (memcmp(&ca, &cb, sizeof(ca)) != 0) {
        fprintf(stderr, "error: '%s' and '%s' are different model shapes\n", argv[1], argv[2]);
        printf("differ\n");
        return 1;
    }
    size_t sizes[GPT2_NUM_PARAM_TENSORS];
    gpt2_param_sizes(&ca, sizes);
    size_t off = 0;
    double all_d2 = 0.0, all_a2 = 0.0, all_max = 0.0;
    for (int t = 0; t < GPT2_NUM_PARAM_TENSORS; t++) {
        double maxd = 0.0, d2 = 0.0, a2 = 0.0;
        for (size_t i = off; i < off + sizes[t]; i++) {
            if (!memcmp(&a[i], &b[i], sizeof(float))) {   // the same bits (a NaN on both sides too)
                a2 += (double)a[i] * a[i];
                continue;
            }
            double d = fabs((double)a[i] - (double)b[i]);
            if (d > maxd || (isnan(d) && !isnan(maxd))) maxd = d;   // a NaN on one side is the largest difference
            d2 += d * d;
            a2 += (double)a[i] * a[i];
        }
        double rel = a2 > 0 ? sqrt(d2 / a2) : sqrt(d2);
        all_d2 += d2;
        all_a2 += a2;
        if (maxd > all_max || (isnan(maxd) && !isnan(all_max))) all_max = maxd;
        printf("%-10s max|diff| %.3e  rel L2 %.3e\n", gpt2_param_name(t), maxd, rel);
        off += sizes[t];
    }
    int same = memcmp(a, b, off * sizeof(float)) == 0;
    double rel = all_a2 > 0 ? sqrt(all_d2 / all_a2) : sqrt(all_d2);
    int equal = same || (tol > 0 && rel <= tol);
    printf("%s; model max|diff| %.3e, relative L2 %.3e (tolerance %.1e)\n",
           same ? "bit-identical" : "not bit-identical", all_max, rel, tol);
    printf("%s\n", equal ? "equal within tolerance" : "differ");
    free(a);
    free(b);
    return equal ? 0 : 1;
}
