// nvidia-smi for a simulated node's host root: what `chroot /host nvidia-smi`
// runs there (the MIG manager resets GPUs that way, as NVIDIA's does). Static
// C, because a simulated node's root has no libc to load a dynamic one.
//
//   nvidia-smi -r|--gpu-reset -i|--id ID[,ID...]   ID: index or PCI bus id
//
// asks the node's simulated hardware, over the socket the simulated kubelet
// serves (/run/gpuop-sim-hw.sock in the node's root; sim/cluster/hw_control.h),
// to reset each GPU, and prints what nvidia-smi prints. Anything else says it
// is a stand-in and exits 0.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char kSocket[] = "/run/gpuop-sim-hw.sock";

// One request line, one answer line ("ok TEXT" or "error TEXT"); 0 on "ok".
static int Ask(const char* request, char* answer, size_t size) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) {
    snprintf(answer, size, "socket: %s", strerror(errno));
    return -1;
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, kSocket, sizeof addr.sun_path - 1);
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) {
    snprintf(answer, size, "the simulated hardware does not answer at %s: %s", kSocket,
             strerror(errno));
    close(fd);
    return -1;
  }
  size_t len = strlen(request);
  if (write(fd, request, len) != (ssize_t)len) {
    snprintf(answer, size, "writing to %s: %s", kSocket, strerror(errno));
    close(fd);
    return -1;
  }
  size_t got = 0;
  while (got + 1 < size) {
    ssize_t n = read(fd, answer + got, size - 1 - got);
    if (n <= 0) break;
    got += (size_t)n;
    if (memchr(answer, '\n', got) != NULL) break;
  }
  close(fd);
  answer[got] = '\0';
  char* nl = strchr(answer, '\n');
  if (nl != NULL) *nl = '\0';
  if (strncmp(answer, "ok ", 3) == 0) {
    memmove(answer, answer + 3, strlen(answer + 3) + 1);
    return 0;
  }
  if (strncmp(answer, "error ", 6) == 0) memmove(answer, answer + 6, strlen(answer + 6) + 1);
  return -1;
}

int main(int argc, char** argv) {
  int reset = 0;
  const char* ids = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-r") == 0 || strcmp(argv[i], "--gpu-reset") == 0) {
      reset = 1;
    } else if ((strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "--id") == 0) && i + 1 < argc) {
      ids = argv[++i];
    } else if (strncmp(argv[i], "--id=", 5) == 0) {
      ids = argv[i] + 5;
    }
  }
  if (!reset) {
    puts("nvidia-smi: simulated by gpuop; only -r -i ID (a GPU reset) is implemented");
    return 0;
  }
  if (ids == NULL) {
    fputs("nvidia-smi: a GPU reset needs -i ID (index or PCI bus id)\n", stderr);
    return 2;
  }
  char* list = strdup(ids);
  int failed = 0;
  for (char* id = strtok(list, ","); id != NULL; id = strtok(NULL, ",")) {
    char request[256], answer[1024];
    snprintf(request, sizeof request, "reset %s\n", id);
    if (Ask(request, answer, sizeof answer) == 0) {
      printf("GPU %s was successfully reset.\n", answer);
    } else {
      fprintf(stderr, "Unable to reset GPU %s: %s\n", id, answer);
      failed = 1;
    }
  }
  free(list);
  if (!failed) puts("All done.");
  return failed ? 1 : 0;
}
