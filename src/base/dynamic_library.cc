#include "base/dynamic_library.h"

#include <dlfcn.h>

namespace gpuop {

void* ResolveFirstSymbol(void* handle, std::initializer_list<const char*> names,
                         const char** resolved) {
  *resolved = *names.begin();
  for (const char* name : names) {
    dlerror();
    void* p = dlsym(handle, name);
    if (p != nullptr) {
      *resolved = name;
      return p;
    }
  }
  return nullptr;
}

}  // namespace gpuop
