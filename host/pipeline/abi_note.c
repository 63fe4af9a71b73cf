/* abi_note.c - reads the ABI version a plugin file records (the ELF note
 * HK_PLUGIN emits) without loading it, so the loader can refuse a newer
 * plugin before dlopen binds symbols this host does not have. */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

#if UINTPTR_MAX > 0xffffffffu
#define HK_ELF_CLASS ELFCLASS64
typedef Elf64_Ehdr hk_ehdr;
typedef Elf64_Phdr hk_phdr;
#else
#define HK_ELF_CLASS ELFCLASS32
typedef Elf32_Ehdr hk_ehdr;
typedef Elf32_Phdr hk_phdr;
#endif

/* Notes larger than this are not ours (the segment is not read). */
#define NOTE_SEGMENT_MAX (1u << 20)

static bool read_at(int fd, void *buf, size_t n, off_t off) {
  return pread(fd, buf, n, off) == (ssize_t)n;
}

/* Scans one PT_NOTE segment's bytes for the hlokit ABI note. */
static bool find_note(const unsigned char *p, size_t n, size_t align, uint32_t *version) {
  size_t at = 0;
  while (at + 12 <= n) {
    uint32_t namesz, descsz, type;
    memcpy(&namesz, p + at, 4);
    memcpy(&descsz, p + at + 4, 4);
    memcpy(&type, p + at + 8, 4);
    size_t name_at = at + 12;
    size_t desc_at = name_at + ((namesz + align - 1) & ~(align - 1));
    size_t next = desc_at + ((descsz + align - 1) & ~(align - 1));
    if (desc_at > n || next > n || next <= at) return false;
    if (type == HK_ABI_NOTE_TYPE && namesz == sizeof HK_ABI_NOTE_OWNER && descsz == 4 &&
        memcmp(p + name_at, HK_ABI_NOTE_OWNER, namesz) == 0) {
      memcpy(version, p + desc_at, 4);
      return true;
    }
    at = next;
  }
  return false;
}

bool hk_plugin_file_abi(const char *path, uint32_t *version) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool found = false;
  hk_ehdr eh;
  if (read_at(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == HK_ELF_CLASS && eh.e_phentsize == sizeof(hk_phdr)) {
    for (unsigned i = 0; i < eh.e_phnum && !found; i++) {
      hk_phdr ph;
      if (!read_at(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph))) break;
      if (ph.p_type != PT_NOTE || ph.p_filesz == 0 || ph.p_filesz > NOTE_SEGMENT_MAX) continue;
      unsigned char *buf = malloc(ph.p_filesz);
      if (!buf) break;
      size_t align = ph.p_align == 8 ? 8 : 4;
      if (read_at(fd, buf, ph.p_filesz, (off_t)ph.p_offset))
        found = find_note(buf, ph.p_filesz, align, version);
      free(buf);
    }
  }
  close(fd);
  return found;
}
