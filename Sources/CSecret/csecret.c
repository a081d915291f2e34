// Loading libsecret at its first use (CSecret.h says why).
#define _GNU_SOURCE
#include "CSecret.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>

struct csecret_functions csecret_table;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libsecret was not loaded";
static char failure_text[512];
static char loaded_path[512];

// The soname every distribution installs (libsecret-1-0 on Debian and Ubuntu), then the development link.
static const char *const library_names[] = {"libsecret-1.so.0", "libsecret-1.so"};

static void load(void) {
    void *library = NULL;
    size_t used = 0;
    for (size_t i = 0; i < sizeof library_names / sizeof library_names[0] && library == NULL; i++) {
        // Bound now (a missing function fails here, not at a call) and kept to this table: the libraries' symbols
        // are not added to the process's global scope. Never closed: GLib keeps threads and types registered.
        library = dlopen(library_names[i], RTLD_NOW | RTLD_LOCAL);
        if (library == NULL) {
            const char *reason = dlerror();
            int n = snprintf(failure_text + used, sizeof failure_text - used, "%s%s", used ? "; " : "",
                             reason ? reason : library_names[i]);
            if (n > 0) used = (size_t)n + used < sizeof failure_text ? used + (size_t)n : sizeof failure_text - 1;
        }
    }
    if (library == NULL) {
        load_failure = failure_text;
        return;
    }
    // A handle's lookup searches the library and then the libraries it depends on: GIO, GObject and GLib.
#define CSECRET_RESOLVE(name)                                                                                   \
    {                                                                                                           \
        void *address = dlsym(library, #name);                                                                  \
        if (address == NULL) {                                                                                  \
            snprintf(failure_text, sizeof failure_text, "libsecret (with GIO, GObject and GLib) has no %s",     \
                     #name);                                                                                    \
            load_failure = failure_text;                                                                        \
            return;                                                                                             \
        }                                                                                                       \
        *(void **)&csecret_table.name = address;                                                                \
    }
#define CSECRET_LOAD(ret, name, params, args) CSECRET_RESOLVE(name)
#define CSECRET_LOAD_VOID(name, params, args) CSECRET_RESOLVE(name)
    CSECRET_FUNCTIONS(CSECRET_LOAD, CSECRET_LOAD_VOID)
#undef CSECRET_LOAD
#undef CSECRET_LOAD_VOID
#undef CSECRET_RESOLVE
    struct link_map *map = NULL;
    if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL) {
        snprintf(loaded_path, sizeof loaded_path, "%s", map->l_name);
    }
    load_failure = NULL;
}

const char *csecret_secret_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

const char *csecret_secret_path(void) {
    return csecret_secret_load() == NULL && loaded_path[0] != '\0' ? loaded_path : NULL;
}
