/* Loads an application library the way Python loads torch: dlopen(..., RTLD_LOCAL),
 * so its NCCL dependency stays out of the global scope. Usage: local_loader LIB ARGS...
 * calls app_main(ARGS...) from LIB. Test code for the LD_PRELOAD shim. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*app)(int, char**) = (int (*)(int, char**))dlsym(h, "app_main");
  if (app == NULL) return 2;
  return app(argc - 1, argv + 1);
}
