/* --init for the tasks whose model is a kn_module tree (dlrm, unet): initial weights from a
 * safetensors file in the module's state_dict names, such as a checkpoint's model.safetensors. */
#ifndef KILN_TOOLS_TRAIN_INIT_H
#define KILN_TOOLS_TRAIN_INIT_H

#include <kiln/kiln.h>

/* Every parameter and buffer of module from the file at path, each in its own dtype on the
 * default device. A missing, misshapen or extra tensor is an error naming the file and the
 * tensor (task names the model in the message). */
kn_status train_init_module(void *module, const char *path, const char *task);

#endif
