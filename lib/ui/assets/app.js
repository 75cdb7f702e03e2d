// EchoMQ dashboard: keeps an open page current. Every page works without this script (links and forms);
// with it, relative times tick, and every `data-refresh-ms` the page asks its own address for JSON (its
// live values: see lib/ui/layout.ts) and sets the text of the elements that show them. Text only: never
// HTML. When what the page lists changed, it says so and offers a reload rather than redrawing under the
// reader's focus. The rules for relative times are lib/ui/format.ts's.
;(() => {
  const body = document.body
  const refreshMs = Number(body.dataset.refreshMs || 0)
  const shape = body.dataset.shape || ''
  // Redis's clock minus this browser's: times are compared with Redis's clock, as the server does.
  let skew = Number(body.dataset.now) - Date.now()
  const now = () => Date.now() + skew

  const span = (ms) => {
    const a = Math.abs(ms)
    if (a < 1000) return `${Math.round(a)} ms`
    if (a < 60000) return `${Math.floor(a / 1000)} s`
    if (a < 3600000) return `${Math.floor(a / 60000)} min`
    if (a < 86400000) return `${Math.floor(a / 3600000)} h`
    return `${Math.floor(a / 86400000)} d`
  }
  const relative = (at) => {
    const d = at - now()
    if (Math.abs(d) < 1000) return 'now'
    return d < 0 ? `${span(d)} ago` : `in ${span(d)}`
  }
  const lease = (at) => {
    const left = at - now()
    return left > 0 ? `${Math.ceil(left / 1000)} s left` : 'lapsed'
  }

  // A time shows its relative text (.rel) and, beside it, the absolute one in UTC (.abs, to the second).
  const absolute = (at) => new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z')
  const times = () => {
    for (const el of document.querySelectorAll('time[data-at]')) {
      const at = Number(el.dataset.at)
      const rel = el.querySelector('.rel') || el
      rel.textContent = el.dataset.kind === 'lease' ? lease(at) : relative(at)
      const abs = el.querySelector('.abs')
      if (abs) abs.textContent = absolute(at)
    }
  }
  const localTitles = () => {
    for (const el of document.querySelectorAll('time[data-at]')) {
      const d = new Date(Number(el.dataset.at))
      el.title = `${d.toLocaleString()} (${d.toISOString()})`
    }
  }

  const byKey = (attr) => {
    const map = new Map()
    for (const el of document.querySelectorAll(`[${attr}]`)) {
      const key = el.getAttribute(attr)
      map.set(key, [...(map.get(key) || []), el])
    }
    return map
  }
  const texts = byKey('data-live')
  const liveTimes = byKey('data-live-time')

  // UTC, as the server draws them (the axis and bar titles say "UTC").
  const hhmm = (minute) => `${new Date(minute * 60000).toISOString().slice(11, 16)} UTC`
  const n = (x) => x.toLocaleString('en-US')
  const chart = (series) => {
    const fig = document.querySelector('[data-chart]')
    if (!fig || !Array.isArray(series)) return
    const max = Math.max(0, ...series.map((m) => m.completed + m.failed))
    const scale = max === 0 ? 0 : 100 / max
    let completed = 0
    let failed = 0
    series.forEach((m, i) => {
      completed += m.completed
      failed += m.failed
      const g = fig.querySelector(`[data-bar="${i}"]`)
      if (!g) return
      const c = Math.round(m.completed * scale)
      const f = Math.round(m.failed * scale)
      g.querySelector('rect.c').setAttribute('y', String(100 - c))
      g.querySelector('rect.c').setAttribute('height', String(c))
      g.querySelector('rect.f').setAttribute('y', String(100 - c - f))
      g.querySelector('rect.f').setAttribute('height', String(f))
      g.querySelector('title').textContent = `${hhmm(m.minute)}: ${n(m.completed)} completed, ${n(m.failed)} failed`
    })
    fig.querySelector('[data-chart-total="completed"]').textContent = n(completed)
    fig.querySelector('[data-chart-total="failed"]').textContent = n(failed)
    fig.querySelector('[data-chart-max]').textContent = n(max)
    const axis = fig.querySelectorAll('.axis span')
    if (series.length > 0 && axis.length === 2) {
      axis[0].textContent = hhmm(series[0].minute)
      axis[1].textContent = hhmm(series[series.length - 1].minute)
    }
  }

  const offline = (reason) => {
    const note = document.getElementById('offline')
    if (!note) return
    note.hidden = reason === undefined
    if (reason !== undefined) document.getElementById('offline-reason').textContent = reason
  }

  const apply = (snap) => {
    skew = Number(snap.now) - Date.now()
    for (const [key, value] of Object.entries(snap.text || {})) {
      for (const el of texts.get(key) || []) {
        el.textContent = value
        if (key === 'paused' || key.endsWith('|paused')) el.classList.toggle('warn', value === 'paused')
        // A queue with ready jobs and no worker (lib/ui/operator-page.ts workersCell): red while it lasts.
        if (key.endsWith('|workers')) {
          el.classList.toggle('badge', value === 'none')
          el.classList.toggle('danger', value === 'none')
        }
      }
    }
    for (const [key, at] of Object.entries(snap.times || {})) {
      for (const el of liveTimes.get(key) || []) {
        el.dataset.at = String(at)
        el.setAttribute('datetime', new Date(at).toISOString())
      }
    }
    chart(snap.chart)
    document.getElementById('stale').hidden = snap.shape === shape
    times()
    localTitles()
  }

  let busy = false
  const refresh = async () => {
    if (busy || document.hidden) return
    busy = true
    try {
      const res = await fetch(location.href, { headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' })
      const snap = await res.json()
      if (!res.ok) throw new Error(snap?.error ? `${snap.error.code}: ${snap.error.message}` : `HTTP ${res.status}`)
      apply(snap)
      offline(undefined)
    } catch (err) {
      offline(err instanceof Error ? err.message : String(err))
    } finally {
      busy = false
    }
  }

  times()
  localTitles()
  setInterval(times, 1000)
  if (refreshMs > 0) {
    setInterval(refresh, refreshMs)
    document.addEventListener('visibilitychange', () => document.hidden || refresh())
  }
  for (const el of document.querySelectorAll('.axis span[data-minute]')) el.textContent = hhmm(Number(el.dataset.minute))
})()
