/* Reading small JSON files (config.json and friends) with messages that name the file. */
#ifndef KILN_MODELS_JSON_FILE_H
#define KILN_MODELS_JSON_FILE_H

#include <cjson/cJSON.h>
#include <kiln/kiln.h>

/* The parsed object, or NULL with KN_ERR_IO naming path (missing, unreadable, not a JSON
 * object). The caller frees it with cJSON_Delete. */
cJSON *json_file_read(const char *path);

#endif
