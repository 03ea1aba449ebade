/* `kiln ops`: the coverage table and each op's signature, read from the op table itself. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kiln/kiln.h"

/* The op's signature text (its longest is well under this). */
static const char *signature_of(int op, char *buf, size_t size) {
    kn_op_signature(op, buf, size);
    return buf;
}

/* "inputs": [{name, optional, variadic}], "attributes": [{name, type}]. */
static void add_params(cJSON *op, int index) {
    cJSON *inputs = cJSON_AddArrayToObject(op, "inputs"), *attrs = cJSON_AddArrayToObject(op, "attributes");
    for (int k = 0; k < kn_op_param_count(index); k++) {
        kn_op_param_info p;
        kn_op_get_param(index, k, &p);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "name", p.name);
        if (p.input) {
            cJSON_AddBoolToObject(item, "optional", p.optional);
            cJSON_AddBoolToObject(item, "variadic", p.variadic);
        } else {
            cJSON_AddStringToObject(item, "type", p.type);
        }
        cJSON_AddItemToArray(p.input ? inputs : attrs, item);
    }
}

static int print_json(const kn_device_type *devices, int n_devices) {
    cJSON *root = cJSON_CreateObject(), *ops = cJSON_AddArrayToObject(root, "ops");
    cJSON_AddStringToObject(root, "version", kn_version());
    for (int i = 0; i < kn_op_count(); i++) {
        kn_op_info info;
        kn_op_get_info(i, &info);
        cJSON *op = cJSON_CreateObject();
        cJSON_AddStringToObject(op, "name", info.name);
        cJSON_AddStringToObject(op, "kind", info.kind);
        if (info.expr) cJSON_AddStringToObject(op, "expr", info.expr);
        char sig[512];
        cJSON_AddStringToObject(op, "signature", signature_of(i, sig, sizeof sig));
        add_params(op, i);
        cJSON *backends = cJSON_AddObjectToObject(op, "kernels");
        for (int k = 0; k < n_devices; k++) {
            cJSON *list = cJSON_AddArrayToObject(backends, kn_device_type_name(devices[k]));
            uint32_t mask = kn_op_kernel_dtypes(i, devices[k]);
            for (int d = 0; d < KN_DTYPE_COUNT; d++)
                if (mask & KN_DT(d)) cJSON_AddItemToArray(list, cJSON_CreateString(kn_dtype_name(d)));
        }
        cJSON_AddItemToArray(ops, op);
    }
    char *text = cJSON_Print(root);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(root);
    return 0;
}

static int print_table(const kn_device_type *devices, int n_devices) {
    int width = 29; /* the longest op name's */
    for (int i = 0; i < kn_op_count(); i++) {
        kn_op_info info;
        kn_op_get_info(i, &info);
        if ((int)strlen(info.name) > width) width = (int)strlen(info.name);
    }
    printf("%-*s %-12s %-7s", width, "op", "kind", "device");
    for (int d = 0; d < KN_DTYPE_COUNT; d++) printf(" %-4s", kn_dtype_name(d));
    printf(" signature\n");
    int covered = 0, cells = 0;
    for (int i = 0; i < kn_op_count(); i++) {
        kn_op_info info;
        kn_op_get_info(i, &info);
        for (int k = 0; k < n_devices; k++) {
            uint32_t mask = kn_op_kernel_dtypes(i, devices[k]);
            printf("%-*s %-12s %-7s", width, k ? "" : info.name, k ? "" : info.kind, kn_device_type_name(devices[k]));
            for (int d = 0; d < KN_DTYPE_COUNT; d++) {
                printf(" %-4s", mask & KN_DT(d) ? "yes" : (info.accepted & KN_DT(d)) ? "via" : "-");
                cells++;
                covered += (mask & KN_DT(d)) != 0;
            }
            char sig[512];
            printf("%s%s\n", k ? "" : " ", k ? "" : signature_of(i, sig, sizeof sig));
        }
    }
    printf("\n%d ops; %d of %d op x device x dtype cells have a kernel.\n"
           "'via': accepted and computed in a promoted dtype (e.g. exp of i32 in f32).\n"
           "signature: inputs (? optional, ... any number); attributes after ';' with their types.\n",
           kn_op_count(), covered, cells);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: kiln ops [--device D] [--json]\n"
               "  the op table: each op, its kind, the dtypes each backend has a kernel for, and its\n"
               "  signature (inputs and typed attributes)\n\n"
               "options:\n"
               "  --device D  only this backend: cpu, meta or cuda [default: cpu and meta]\n"
               "  --json      print JSON instead of the table [default: the table]\n");
}

int kiln_cmd_ops(int argc, char **argv) {
    if (kiln_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    bool json = false;
    kn_device_type devices[KN_DEVICE_TYPE_COUNT] = {KN_DEVICE_CPU, KN_DEVICE_META};
    int n_devices = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            kn_device d;
            if (!kn_device_parse(argv[++i], &d)) {
                fprintf(stderr, "kiln ops: unknown device '%s' (try cpu, meta or cuda)\n", argv[i]);
                return 2;
            }
            devices[0] = d.type;
            n_devices = 1;
        } else {
            fprintf(stderr, "kiln ops: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    return json ? print_json(devices, n_devices) : print_table(devices, n_devices);
}
