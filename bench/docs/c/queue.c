/* A fixed-size ring buffer of integers. */
int buffer[64];
int head = 0;
int tail = 0;
int count = 0;

int queue_push(int value) {
  if (count == 64) {
    return -1;
  }
  buffer[tail] = value;
  tail = (tail + 1) % 64;
  count += 1;
  return 0;
}

int queue_pop(int *out) {
  if (count == 0) return -1;
  *out = buffer[head];
  head = (head + 1) % 64;
  count -= 1;
  return 0;
}

int queue_sum(void) {
  int total = 0;
  int i;
  for (i = 0; i < count; i++) {
    total += buffer[(head + i) % 64];
  }
  return total;
}
