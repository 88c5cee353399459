// Sieve of Eratosthenes and a few helpers.
char sieve[10000];

void mark_composites(int limit) {
  int i;
  int j;
  for (i = 0; i < limit; i++) sieve[i] = 1;
  sieve[0] = 0;
  sieve[1] = 0;
  for (i = 2; i * i < limit; i++) {
    if (sieve[i]) {
      for (j = i * i; j < limit; j += i) {
        sieve[j] = 0;
      }
    }
  }
}

int count_primes(int limit) {
  int n = 0;
  int i;
  mark_composites(limit);
  for (i = 0; i < limit; i++) {
    if (sieve[i] != 0) n++;
  }
  return n;
}

int nth_prime(int k) {
  int i = 2;
  while (k > 0 && i < 10000) {
    if (sieve[i] == 1) {
      k = k - 1;
      if (k == 0) return i;
    }
    i++;
  }
  return -1;
}
