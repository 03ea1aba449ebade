/* Reading small JSON files with messages that name the file. */
#include "lm/json_file.h"

#include <stdio.h>
#include <stdlib.h>

cJSON *json_file_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return kn_set_error(KN_ERR_IO, "%s: cannot open the file", path), NULL;
    char *text = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (!text) return kn_set_error(KN_ERR_IO, "%s: reading the file failed", path), NULL;
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kn_set_error(KN_ERR_IO, "%s: not a JSON object", path), NULL;
    }
    return root;
}
