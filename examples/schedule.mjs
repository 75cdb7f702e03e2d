import { Queue, Worker } from 'echomq'

// A run every 200 ms (the first at once), made by whichever worker starts the previous one, or by the sweep
// when no worker runs: a schedule needs no host of its own.
const connection = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const queue = new Queue('reports', { connection })
await queue.upsertJobScheduler('digest', { every: 200 }, { name: 'digest', data: { to: 'team@example.com' } })
const [scheduler] = await queue.getJobSchedulers()
console.log(scheduler.key, scheduler.every) // digest 200

const runs = []
const worker = new Worker(
  'reports',
  async (job) => {
    runs.push(job.id) // repeat:digest:<the run's due time, ms>
  },
  { connection },
)
await new Promise((resolve) => worker.on('completed', () => runs.length >= 2 && resolve()))
const fromSchedule = runs.every((id) => id.startsWith('repeat:digest:'))
console.log(runs.length, fromSchedule) // 2 true

console.log(await queue.removeJobScheduler('digest')) // true: the schedule and its pending run are gone
await worker.close()
await queue.close()
