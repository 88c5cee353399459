/* String helpers without the standard library. */
long length(const char *s) {
  long n = 0;
  while (s[n] != '\0') n++;
  return n;
}

int compare(const char *a, const char *b) {
  long i = 0;
  while (a[i] != '\0' && a[i] == b[i]) {
    i++;
  }
  return a[i] - b[i];
}

void reverse(char *s) {
  long i = 0;
  long j = length(s) - 1;
  char t;
  while (i < j) {
    t = s[i];
    s[i] = s[j];
    s[j] = t;
    i++;
    j--;
  }
}

int is_palindrome(const char *s) {
  long i = 0;
  long j = length(s) - 1;
  for (; i < j; i++) {
    if (s[i] != s[j]) return 0;
    j -= 1;
  }
  return 1;
}
