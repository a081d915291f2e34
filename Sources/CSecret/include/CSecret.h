#ifndef CSECRET_H
#define CSECRET_H
// libsecret, loaded when a Secret Service or Secret portal key store is first used, not linked.
//
// A library in a product's link line is loaded, relocated and initialized by the dynamic linker in every process
// of the product: libsecret brings GIO, GObject, GLib and ten more (libgcrypt, libmount, libselinux, ...), about
// 2.5 ms at each start of vaultctl or of an app that keeps its key in a file, the kernel keyring or a systemd
// credential, whose processes never call them; and a process could not start at all where libsecret is not
// installed. So the package declares what it calls here (the types, the constants and csecret_functions.h's
// signatures, as libsecret's and GLib's headers give them), and csecret_secret_load() opens libsecret-1.so.0 at
// the first use (GIO, GObject and GLib come with it as its dependencies) and takes each function from it.
//
// Until csecret_secret_load() has returned NULL, no other function here may be called (each calls through the
// table it fills). SecretServiceTests' CSecretDeclarationTests compiles these declarations against the
// libraries' own headers: every signature, constant and structure layout must match.

#include <stddef.h>

// GLib's basic types below are those of an LP64 system (glibconfig.h there); another data model needs its own.
_Static_assert(sizeof(long) == 8 && sizeof(void *) == 8, "CSecret.h declares GLib's types for LP64 systems only");

// MARK: GLib's basic types (glib/gtypes.h, glibconfig.h on an LP64 system)

typedef char gchar;
typedef int gint;
typedef unsigned int guint;
typedef gint gboolean;
typedef long glong;
typedef unsigned long gulong;
typedef signed int gint32;
typedef unsigned int guint32;
typedef signed long gint64;
typedef unsigned long guint64;
typedef unsigned long gsize;
typedef signed long gssize;
typedef float gfloat;
typedef double gdouble;
typedef void *gpointer;
typedef const void *gconstpointer;
typedef gsize GType;
typedef guint32 GQuark;

// MARK: Structures the package reads or fills (their layout is GLib's and libsecret's)

typedef struct _GError {
    GQuark domain;
    gint code;
    gchar *message;
} GError;

typedef struct _GList GList;
struct _GList {
    gpointer data;
    GList *next;
    GList *prev;
};

typedef struct _GValue {
    GType g_type;
    union {
        gint v_int;
        guint v_uint;
        glong v_long;
        gulong v_ulong;
        gint64 v_int64;
        guint64 v_uint64;
        gfloat v_float;
        gdouble v_double;
        gpointer v_pointer;
    } data[2];
} GValue;

typedef enum {
    SECRET_SCHEMA_ATTRIBUTE_STRING = 0,
    SECRET_SCHEMA_ATTRIBUTE_INTEGER = 1,
    SECRET_SCHEMA_ATTRIBUTE_BOOLEAN = 2,
} SecretSchemaAttributeType;

typedef struct {
    const gchar *name;
    SecretSchemaAttributeType type;
} SecretSchemaAttribute;

typedef enum {
    SECRET_SCHEMA_NONE = 0,
    SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1,
} SecretSchemaFlags;

typedef struct {
    const gchar *name;
    SecretSchemaFlags flags;
    SecretSchemaAttribute attributes[32];
    gint reserved;
    gpointer reserved1;
    gpointer reserved2;
    gpointer reserved3;
    gpointer reserved4;
    gpointer reserved5;
    gpointer reserved6;
    gpointer reserved7;
} SecretSchema;

// MARK: Objects the package holds by pointer only

// GLib's headers define these as structures (an object's public instance), so Swift imports a pointer to one as a
// typed pointer; each is declared complete here, with one placeholder member, to be imported the same way. Never
// allocated, copied or read here: their real size and members are the libraries' own.
#define CSECRET_OBJECT(Name) typedef struct _##Name { void *csecret_placeholder; } Name;
CSECRET_OBJECT(GObject)
CSECRET_OBJECT(GCancellable)
CSECRET_OBJECT(GDBusProxy)
CSECRET_OBJECT(GSocket)
CSECRET_OBJECT(GSocketAddress)
CSECRET_OBJECT(GSocketConnection)
CSECRET_OBJECT(GUnixFDList)
CSECRET_OBJECT(GSource)
CSECRET_OBJECT(SecretService)
CSECRET_OBJECT(SecretCollection)
CSECRET_OBJECT(SecretItem)
#undef CSECRET_OBJECT

// Opaque in GLib's and libsecret's headers too.
typedef struct _GVariant GVariant;
typedef struct _GVariantType GVariantType;
typedef struct _GDBusConnection GDBusConnection;
typedef struct _GHashTable GHashTable;
typedef struct _GMainContext GMainContext;
typedef struct _GInitable GInitable;
typedef struct _SecretValue SecretValue;

// MARK: Callbacks

typedef void (*GCallback)(void);
typedef void (*GDestroyNotify)(gpointer data);
typedef gboolean (*GSourceFunc)(gpointer user_data);
typedef guint (*GHashFunc)(gconstpointer key);
typedef gboolean (*GEqualFunc)(gconstpointer a, gconstpointer b);
typedef void (*GDBusSignalCallback)(
    GDBusConnection *connection, const gchar *sender_name, const gchar *object_path, const gchar *interface_name,
    const gchar *signal_name, GVariant *parameters, gpointer user_data);

// MARK: Constants (the enumerations' members the package uses, with their values)

#define G_SOURCE_REMOVE 0

typedef enum {
    G_IO_ERROR_CLOSED = 18,
    G_IO_ERROR_CANCELLED = 19,
    G_IO_ERROR_TIMED_OUT = 24,
} GIOErrorEnum;

typedef enum {
    G_DBUS_ERROR_SERVICE_UNKNOWN = 2,
    G_DBUS_ERROR_NAME_HAS_NO_OWNER = 3,
    G_DBUS_ERROR_NO_REPLY = 4,
    G_DBUS_ERROR_NO_SERVER = 11,
    G_DBUS_ERROR_TIMEOUT = 12,
    G_DBUS_ERROR_DISCONNECTED = 15,
    G_DBUS_ERROR_FILE_NOT_FOUND = 17,
    G_DBUS_ERROR_UNKNOWN_METHOD = 19,
    G_DBUS_ERROR_TIMED_OUT = 20,
    G_DBUS_ERROR_UNKNOWN_OBJECT = 41,
    G_DBUS_ERROR_UNKNOWN_INTERFACE = 42,
} GDBusError;

typedef enum {
    G_DBUS_CALL_FLAGS_NONE = 0,
    G_DBUS_CALL_FLAGS_NO_AUTO_START = 1 << 0,
} GDBusCallFlags;

typedef enum {
    G_DBUS_SIGNAL_FLAGS_NONE = 0,
} GDBusSignalFlags;

typedef enum {
    G_DBUS_CONNECTION_FLAGS_NONE = 0,
    G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT = 1 << 0,
    G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION = 1 << 3,
    G_DBUS_CONNECTION_FLAGS_CROSS_NAMESPACE = 1 << 6,
} GDBusConnectionFlags;

typedef enum {
    G_SOCKET_FAMILY_UNIX = 1,
} GSocketFamily;

typedef enum {
    G_SOCKET_TYPE_STREAM = 1,
} GSocketType;

typedef enum {
    G_SOCKET_PROTOCOL_UNKNOWN = -1,  // also what makes the enumeration's type signed, as GLib's is
    G_SOCKET_PROTOCOL_DEFAULT = 0,
} GSocketProtocol;

typedef enum {
    G_UNIX_SOCKET_ADDRESS_PATH = 2,
    G_UNIX_SOCKET_ADDRESS_ABSTRACT = 3,
} GUnixSocketAddressType;

typedef enum {
    SECRET_ERROR_IS_LOCKED = 2,
} SecretError;

typedef enum {
    SECRET_SERVICE_NONE = 0,
} SecretServiceFlags;

typedef enum {
    SECRET_SEARCH_ALL = 1 << 1,
} SecretSearchFlags;

typedef enum {
    SECRET_COLLECTION_NONE = 0,
} SecretCollectionFlags;

// MARK: The functions

#include "csecret_functions.h"

/// The function table csecret_secret_load() fills, one pointer a function of csecret_functions.h.
struct csecret_functions {
#define CSECRET_POINTER(ret, name, params, args) ret (*name) params;
#define CSECRET_VOID_POINTER(name, params, args) void (*name) params;
    CSECRET_FUNCTIONS(CSECRET_POINTER, CSECRET_VOID_POINTER)
#undef CSECRET_POINTER
#undef CSECRET_VOID_POINTER
};

extern struct csecret_functions csecret_table;

/// Loads libsecret once per process (the first call loads; later calls, from any thread, wait for it and give its
/// answer): NULL when every function was found, else what failed, in the dynamic linker's words (a string that
/// lives as long as the process).
const char *csecret_secret_load(void);

/// The file the loaded libsecret came from (as the dynamic linker found it), or NULL before a successful load.
const char *csecret_secret_path(void);

// Each function under its own name, so that the package calls it as it would call the library's.
#define CSECRET_WRAPPER(ret, name, params, args) \
    static inline ret name params { return csecret_table.name args; }
#define CSECRET_VOID_WRAPPER(name, params, args) \
    static inline void name params { csecret_table.name args; }
CSECRET_FUNCTIONS(CSECRET_WRAPPER, CSECRET_VOID_WRAPPER)
#undef CSECRET_WRAPPER
#undef CSECRET_VOID_WRAPPER

#endif
