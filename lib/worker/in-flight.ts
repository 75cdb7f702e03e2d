/**
 * The calls a worker has sent and Redis has not answered yet (finishes, returns of jobs and reservations,
 * trims): close() waits for them, as a finish may have taken a job that must go back to `wait`.
 */
export class InFlight {
  private readonly calls = new Set<Promise<unknown>>()

  /** Keeps `call` here until it settles; returns it. */
  track<T>(call: Promise<T>): Promise<T> {
    this.calls.add(call)
    const forget = () => this.calls.delete(call)
    void call.then(forget, forget)
    return call
  }

  get size(): number {
    return this.calls.size
  }

  /** Settles when every call tracked now has settled. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.calls])
  }
}
