/* Text generation from C with the installed language-model library (kiln-models): load a
 * Hugging Face model directory, encode a prompt, generate greedily, print the text.
 *
 *     cc generate.c $(pkg-config --cflags --libs kiln-models) -o generate
 *     ./generate MODEL_DIR "Once upon a time" 32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>
#include <lm/generate.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR PROMPT [MAX_NEW_TOKENS]\n", argv[0]);
        return 2;
    }
    lm *model = lm_load(argv[1], NULL);                /* config.json + safetensors, as stored */
    kn_tokenizer *tok = model ? kn_tokenizer_load(argv[1]) : NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    lm_generation out = {0};
    int rc = 1;
    if (!tok || kn_tokenizer_encode(tok, argv[2], strlen(argv[2]), true, &ids, &n_ids) != KN_OK) goto done;
    lm_generate_options opt = lm_generate_defaults(); /* greedy */
    if (argc > 3) opt.max_new_tokens = atoi(argv[3]);
    const int32_t *prompts[] = {ids};
    if (lm_generate(model, tok, 1, prompts, &n_ids, &opt, &out) != KN_OK) goto done;
    printf("%s%s\n", argv[2], out.text[0]);
    rc = 0;
done:
    if (rc) fprintf(stderr, "generate: %s\n", kn_last_error());
    lm_generation_free(&out);
    free(ids);
    kn_tokenizer_free(tok);
    lm_free(model);
    return rc;
}
