/* fuzz_seeds.c - writes the `hlo` text of every line of the given .jsonl files into a folder, one seed file a module, for the parser fuzzer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* Writes text to dir/stem_line.hlo; false when the file cannot be written. */
static int write_seed(const char *dir, const char *stem, long line, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s_%05ld.hlo", dir, stem, line);
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* The file name of path without folder and extension, into buf. */
static void stem_of(const char *path, char *buf, size_t cap) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  snprintf(buf, cap, "%s", b);
  char *dot = strrchr(buf, '.');
  if (dot) *dot = 0;
}

static long seed_file(const char *dir, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "fuzz_seeds: %s: %s (skipped)\n", path, strerror(errno));
    return 0;
  }
  char stem[256];
  stem_of(path, stem, sizeof stem);
  char *line = NULL;
  size_t cap = 0;
  long lineno = 0, written = 0;
  while (getline(&line, &cap, f) > 0) {
    lineno++;
    json_object *o = json_tokener_parse(line);
    json_object *hlo;
    if (o && json_object_object_get_ex(o, "hlo", &hlo) && json_object_is_type(hlo, json_type_string))
      written += write_seed(dir, stem, lineno, json_object_get_string(hlo));
    json_object_put(o);
  }
  free(line);
  fclose(f);
  return written;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fuzz_seeds DIR [FILE.jsonl...]\n");
    return 2;
  }
  long n = 0;
  for (int k = 2; k < argc; k++) n += seed_file(argv[1], argv[k]);
  printf("fuzz_seeds: %ld modules into %s\n", n, argv[1]);
  return 0;
}
