//! The terminal view drawn into ratatui's TestBackend from the recorded
//! fixture series (and the generated 128-CPU/64-queue host), read as a
//! person reads the screen: the text in the cells, and their colours.

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;

use crate::base::stop::Stop;
use crate::host::Selection;
use crate::monitor::{run as run_feed, Feed, Frame};

use super::app::{App, Pane};
use super::keys::handle;
use super::theme::Theme;
use super::ui::draw;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name)
}

/// Every frame of a recorded series.
fn frames_of(dir: &Path) -> Vec<Frame> {
    let mut feed = Feed::replay(dir, Selection::default()).expect("series");
    let mut frames = Vec::new();
    run_feed(&mut feed, &Stop::new(), None, &mut |f: &Frame| {
        frames.push(f.clone());
        Ok(())
    })
    .expect("replay");
    frames
}

fn app_with(frame: Frame) -> App {
    let mut app = App::new("replay test");
    app.on_frame(frame);
    app
}

fn render(app: &App, theme: Theme, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    terminal
        .draw(|canvas| draw(canvas, app, &theme))
        .expect("draw");
    terminal.backend().buffer().clone()
}

/// The screen's rows as text.
fn rows(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

fn screen(buf: &Buffer) -> String {
    rows(buf).join("\n")
}

/// The row whose text (trimmed at the start) begins with `start`.
fn row_starting(buf: &Buffer, start: &str) -> (u16, String) {
    rows(buf)
        .into_iter()
        .enumerate()
        .find(|(_, r)| r.trim_start().starts_with(start))
        .map(|(y, r)| (y as u16, r))
        .unwrap_or_else(|| panic!("no row starting '{start}' in\n{}", screen(buf)))
}

/// Whether a row holds `label`, then only spaces, then `text`: a line of a
/// pane that may sit beside another.
fn labelled(buf: &Buffer, label: &str, text: &str) -> bool {
    rows(buf).iter().any(|row| {
        row.match_indices(label).any(|(at, _)| {
            let rest = &row[at + label.len()..];
            let gap = rest.len() - rest.trim_start_matches(' ').len();
            gap > 0 && rest[gap..].starts_with(text)
        })
    })
}

/// Where `needle` first appears on row `y` (its first cell).
fn column_of(buf: &Buffer, y: u16, needle: &str) -> u16 {
    let row = &rows(buf)[usize::from(y)];
    let byte = row
        .find(needle)
        .unwrap_or_else(|| panic!("no '{needle}' in row {y}: {row}"));
    row[..byte].chars().count() as u16
}

fn press(app: &mut App, code: KeyCode) {
    handle(app, KeyEvent::new(code, KeyModifiers::NONE));
}

fn vm_first() -> Frame {
    frames_of(&fixture("vm-2cpu-virtio")).remove(0)
}

#[test]
fn at_80x24_every_pane_shows_and_the_hot_cpu_is_red() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::colored(), 80, 24);
    let text = screen(&buf);
    for title in [
        "> CPUs",
        "Interrupts/s, queue x CPU",
        "Queues",
        "Drops/s, NIC to socket",
        "Findings",
    ] {
        assert!(text.contains(title), "no '{title}' in\n{text}");
    }
    // CPU1: 91% soft, marked and red; CPU0 calm.
    let (y, row) = row_starting(&buf, "1 ");
    assert!(row.contains("91!"), "{row}");
    let x = column_of(&buf, y, "91!");
    for dx in 0..3 {
        assert_eq!(buf[(x + dx, y)].bg, Color::Red, "{row}");
    }
    let (y0, row0) = row_starting(&buf, "0 ");
    let soft0 = column_of(&buf, y0, " 0 ") + 1;
    assert!(!row0.contains('!'), "{row0}");
    assert_ne!(buf[(soft0, y0)].bg, Color::Red, "{row0}");
    // The title counts it.
    assert!(text.contains("1 saturated by softirq (!)"), "{text}");
    // The bar of CPU1 is mostly soft, drawn red.
    let bar_red = (0..80)
        .filter(|&x| buf[(x, y)].symbol() == "|" && buf[(x, y)].fg == Color::Red)
        .count();
    assert!(bar_red > 20, "{row}");
}

#[test]
fn the_heat_map_cell_of_the_queue_on_its_cpu() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::colored(), 80, 24);
    let (hy, header) = row_starting(&buf, "vector");
    assert!(
        header.contains("cpu0") && header.contains("cpu1"),
        "{header}"
    );
    let cpu1 = column_of(&buf, hy, "cpu1");
    let (y, row) = row_starting(&buf, "eth0 rx0");
    // IRQ 38 (RX queue 0) took 4,999/s on CPU1 and none on CPU0.
    let cell: String = (cpu1..cpu1 + 4)
        .map(|x| buf[(x, y)].symbol().to_string())
        .collect();
    assert_eq!(cell, "4999", "{header}\n{row}");
    assert_eq!(
        buf[(cpu1, y)].fg,
        Color::Red,
        "the busiest cell is the hottest"
    );
    assert!(row.contains('·'), "CPU0 took none: {row}");
}

#[test]
fn the_ladder_marks_the_layer_losing_packets() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::colored(), 80, 24);
    let (y, names) = rows(&buf)
        .into_iter()
        .enumerate()
        .find_map(|(y, r)| r.find("NIC > ").map(|at| (y as u16, r[at..].to_string())))
        .unwrap_or_else(|| panic!("no ladder header in\n{}", screen(&buf)));
    let x = column_of(&buf, y, " UDP ") + 1;
    assert_eq!(buf[(x, y)].bg, Color::Red, "{names}");
    let nic = column_of(&buf, y, "NIC");
    assert_ne!(buf[(nic, y)].bg, Color::Red, "{names}");
    let values = &rows(&buf)[usize::from(y) + 1];
    assert!(values.contains("20.0k"), "{values}");
    let (_, detail) = row_starting(&buf, "<< losing at UDP");
    assert!(detail.contains("InErrors 20.0k/s"), "{detail}");
    // Two-socket host: the NIC loses most.
    let frame = frames_of(&fixture("two-socket-smt-8q")).remove(0);
    let buf = render(&app_with(frame), Theme::colored(), 80, 24);
    let (_, detail) = row_starting(&buf, "<< losing at NIC");
    assert!(detail.contains("eth0 rx_missed_errors"), "{detail}");
}

#[test]
fn traced_reasons_are_named_under_their_layers() {
    use crate::base::drop_layer::Layer;
    use crate::base::drop_reason::{PlaceCount, ReasonRate};
    use crate::monitor::ladder::Tracing;
    let mut frame = vm_first();
    let reason = |name: &str, layer, per_sec: f64, at: Option<&str>| ReasonRate {
        reason: name.to_string(),
        layer,
        count: per_sec as u64,
        per_sec: Some(per_sec),
        locations: vec![PlaceCount {
            name: at.map(str::to_string),
            count: per_sec as u64,
        }],
        protocols: Vec::new(),
        about: Default::default(),
    };
    let drops = &mut frame.rates.drops;
    drops.tracing = Some(Tracing {
        per_sec: Some(452.0),
        ..Tracing::default()
    });
    for layer in &mut drops.layers {
        layer.traced_per_sec = Some(0.0);
    }
    let udp = drops
        .layers
        .iter_mut()
        .find(|l| l.layer == Layer::Udp)
        .expect("udp");
    udp.traced_per_sec = Some(412.0);
    udp.reasons = vec![reason(
        "SOCKET_RCVBUFF",
        Layer::Udp,
        412.0,
        Some("udp_queue_rcv_one_skb+0x2f5"),
    )];
    drops.layers.insert(
        2,
        crate::monitor::DropLayer {
            layer: Layer::Netfilter,
            drops_per_sec: None,
            counters: Vec::new(),
            traced_per_sec: Some(40.0),
            reasons: vec![reason("NETFILTER_DROP", Layer::Netfilter, 40.0, None)],
        },
    );
    let buf = render(&app_with(frame), Theme::plain(), 160, 60);
    let text = screen(&buf);
    // Each reason on its layer's line, wherever the layout puts the pane.
    assert!(
        labelled(
            &buf,
            "UDP",
            "SOCKET_RCVBUFF 412/s at udp_queue_rcv_one_skb+0x2f5"
        ),
        "{text}"
    );
    assert!(
        labelled(&buf, "netfilter", "NETFILTER_DROP 40/s (location hidden)"),
        "{text}"
    );
    // The layer only the tracer sees joins the row because it dropped.
    let (y, names) = rows(&buf)
        .into_iter()
        .enumerate()
        .find_map(|(y, r)| r.find("NIC > ").map(|at| (y as u16, r[at..].to_string())))
        .unwrap_or_else(|| panic!("no ladder header in\n{}", screen(&buf)));
    assert!(names.contains("netfilter"), "{names}");
    assert!(names.find("softnet") < names.find("netfilter"), "{names}");
    assert!(rows(&buf)[usize::from(y) + 1].contains(" 40 "), "{text}");
}

#[test]
fn findings_of_the_interval_are_listed_worst_first() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::colored(), 100, 40);
    let text = screen(&buf);
    let hotspot = text.find("crit softirq.hotspot").expect(&text);
    let squeeze = text.find("warn softnet.squeeze").expect(&text);
    assert!(hotspot < squeeze, "{text}");
    assert!(text.contains("CPU1 at 91% soft"), "{text}");
}

#[test]
fn no_color_uses_no_colour_and_still_says_everything() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::plain(), 80, 24);
    for cell in buf.content() {
        assert_eq!(cell.fg, Color::Reset, "{cell:?}");
        assert_eq!(cell.bg, Color::Reset, "{cell:?}");
    }
    let (y, row) = row_starting(&buf, "1 ");
    let x = column_of(&buf, y, "91!");
    assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED), "{row}");
    // Each part of the bar has its own glyph: soft is #.
    assert!(row.contains("####################"), "{row}");
    let (y, names) = rows(&buf)
        .into_iter()
        .enumerate()
        .find_map(|(y, r)| r.find("NIC > ").map(|at| (y as u16, r[at..].to_string())))
        .unwrap_or_else(|| panic!("no ladder header in\n{}", screen(&buf)));
    let udp = column_of(&buf, y, " UDP ") + 1;
    assert!(
        buf[(udp, y)].modifier.contains(Modifier::REVERSED),
        "{names}"
    );
    assert!(screen(&buf).contains("<< losing at UDP"));
}

#[test]
fn keys_change_sort_filter_pane_and_pause() {
    let frames = frames_of(&fixture("two-socket-smt-8q"));
    let mut app = App::new("replay test");
    app.on_frame(frames[0].clone());
    let first_cpu_row = |app: &App| {
        let buf = render(app, Theme::plain(), 100, 40);
        let (y, _) = row_starting(&buf, "all ");
        // The soft% strip follows "all" on a 32-CPU host.
        rows(&buf)[usize::from(y) + 2].clone()
    };
    assert!(first_cpu_row(&app).trim_start().starts_with("0 "));
    // Sort by soft%: CPU0 (95%) on top still; by CPU id descending? No:
    // cycle to busy% and then NET_RX/s, CPU0 stays first; the table's
    // title names the column.
    press(&mut app, KeyCode::Char('s'));
    let buf = render(&app, Theme::plain(), 100, 40);
    assert!(screen(&buf).contains("sorted by soft%"));
    assert!(first_cpu_row(&app).trim_start().starts_with("0 "));
    // A CPU filter: only CPU 5 and 6.
    press(&mut app, KeyCode::Char('/'));
    for c in "5-6".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let buf = render(&app, Theme::plain(), 100, 40);
    let text = screen(&buf);
    assert!(text.contains("CPUs  2 shown"), "{text}");
    assert!(text.contains("filter: CPU 5-6"), "{text}");
    assert!(first_cpu_row(&app).trim_start().starts_with("5 "));
    // The heat map shows only those CPUs' columns.
    let (_, header) = row_starting(&buf, "vector");
    assert!(
        header.contains("cpu5") && header.contains("cpu6") && !header.contains("cpu0"),
        "{header}"
    );
    // An interface filter that matches nothing empties the queue table.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('/'));
    for c in "eth9".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let buf = render(&app, Theme::plain(), 100, 40);
    let text = screen(&buf);
    assert!(text.contains("no NIC interrupt vectors"), "{text}");
    assert!(
        !rows(&buf).iter().any(|r| r.starts_with("eth0")),
        "no queue rows: {text}"
    );
    press(&mut app, KeyCode::Esc);
    // Tab: the focus mark moves to the heat map, then the queues, whose
    // sort key cycles.
    press(&mut app, KeyCode::Tab);
    let text = screen(&render(&app, Theme::plain(), 100, 40));
    assert!(text.contains("> Interrupts/s"), "{text}");
    assert!(!text.contains("> CPUs"), "{text}");
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.focus, Pane::Queues);
    let text = screen(&render(&app, Theme::plain(), 100, 40));
    assert!(text.contains("sorted by rx pkt/s"), "{text}");
    // Pause: a new frame waits, the screen keeps the old one.
    press(&mut app, KeyCode::Char('p'));
    let before = screen(&render(&app, Theme::plain(), 100, 40));
    assert!(before.contains("PAUSED"), "{before}");
    app.on_frame(frames[1].clone());
    let paused = screen(&render(&app, Theme::plain(), 100, 40));
    assert!(paused.contains("newer data waiting"), "{paused}");
    assert_eq!(app.frame.as_ref(), Some(&frames[0]));
    press(&mut app, KeyCode::Char('p'));
    assert_eq!(app.frame.as_ref(), Some(&frames[1]));
    assert!(!screen(&render(&app, Theme::plain(), 100, 40)).contains("PAUSED"));
    // Help.
    press(&mut app, KeyCode::Char('?'));
    let text = screen(&render(&app, Theme::plain(), 100, 40));
    assert!(text.contains("help (any key closes)"), "{text}");
    assert!(text.contains("next / previous pane"), "{text}");
}

#[test]
fn a_terminal_too_small_says_so_and_nothing_panics() {
    let app = app_with(vm_first());
    let text = screen(&render(&app, Theme::colored(), 40, 10));
    assert!(text.contains("Terminal too small (40x10)"), "{text}");
    assert!(text.contains("60x16"), "{text}");
    for (w, h) in [(1, 1), (0, 0), (59, 40), (200, 15), (60, 16), (300, 100)] {
        let _ = render(&app, Theme::colored(), w, h);
    }
    // Before the first interval.
    let text = screen(&render(&App::new("live"), Theme::colored(), 80, 24));
    assert!(text.contains("Taking the first two samples"), "{text}");
}

#[test]
fn a_resize_to_a_wide_terminal_puts_panes_side_by_side() {
    let app = app_with(vm_first());
    let buf = render(&app, Theme::colored(), 200, 50);
    let (y, row) = row_starting(&buf, "> CPUs");
    assert!(row.contains("Queues"), "CPUs and queues on one line: {row}");
    assert_eq!(y, 1);
}

#[test]
fn a_128_cpu_host_scrolls_and_folds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big");
    let status = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_hosts.py"))
        .args(["--big"])
        .arg(&big)
        .args(["--samples", "2"])
        .status()
        .expect("python3 (scripts/test installs it)");
    assert!(status.success());
    let frame = frames_of(&big).remove(0);
    assert_eq!(frame.rates.cpus.len(), 128);
    let mut app = app_with(frame);
    let buf = render(&app, Theme::colored(), 80, 24);
    let text = screen(&buf);
    assert!(text.contains("CPUs  128 shown"), "{text}");
    // Scrolls: the title says which rows show.
    assert!(text.contains("rows 1-"), "{text}");
    assert!(text.contains("of 128 (arrows scroll)"), "{text}");
    // Folds: the soft% strip holds every CPU (64 busy at 20% soft, 64 idle).
    let (y, strip) = row_starting(&buf, "soft%");
    let next = &rows(&buf)[usize::from(y) + 1];
    let glyphs = |r: &str| r.chars().filter(|c| "·░▒▓█".contains(*c)).count();
    assert_eq!(glyphs(&strip) + glyphs(next), 128, "{strip}\n{next}");
    // The heat map folds CPUs into cells and lists all 65 vectors.
    assert!(text.contains("65 vectors"), "{text}");
    assert!(text.contains("(each cell 3 CPUs)"), "{text}");
    // End shows the last CPU.
    press(&mut app, KeyCode::End);
    let buf = render(&app, Theme::colored(), 80, 24);
    let (_, last) = row_starting(&buf, "127 ");
    assert!(last.contains("  0 "), "{last}");
    // Tab to the heat map, End: the last queue, lit in the cell of CPU 63.
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::End);
    let buf = render(&app, Theme::colored(), 80, 24);
    let (y, row) = row_starting(&buf, "eth0 q63");
    let lit: Vec<usize> = row
        .chars()
        .enumerate()
        .filter(|(_, c)| *c == '█')
        .map(|(i, _)| i)
        .collect();
    assert_eq!(lit.len(), 1, "{row}");
    let (hy, _) = row_starting(&buf, "vector");
    assert!(hy < y);
    // A wide terminal: CPUs left, queues right, the heat map in cells of
    // fewer CPUs.
    let buf = render(&app, Theme::colored(), 220, 60);
    let (_, row) = row_starting(&buf, "CPUs  128 shown");
    assert!(row.contains("Queues"), "{row}");
    assert!(screen(&buf).contains("(each cell 2 CPUs)"));
}

#[test]
fn a_queue_sort_puts_the_busiest_interface_first_and_keeps_queues_under_it() {
    let mut frame = frames_of(&fixture("two-socket-smt-8q")).remove(0);
    // A second, quieter NIC listed before eth0: half of eth0's receive.
    let mut quiet = frame.rates.interfaces[0].clone();
    assert_eq!(quiet.name, "eth0");
    quiet.name = "bond0".to_string();
    let half = |v: &mut Option<f64>| *v = v.map(|x| x / 2.0);
    half(&mut quiet.rx_packets_per_sec);
    for q in &mut quiet.queues {
        half(&mut q.packets_per_sec);
    }
    frame.rates.interfaces.insert(0, quiet);
    let mut app = app_with(frame);
    let order = |app: &App| -> Vec<(String, Option<u32>)> {
        let frame = app.frame.as_ref().expect("frame");
        super::queues::rows(frame, &app.filter, app.queue_sort)
            .into_iter()
            .map(|r| (r.iface, r.queue))
            .collect()
    };
    // By queue: the kernel's order of interfaces, queues by index.
    let rows = order(&app);
    assert_eq!(rows[0], ("bond0".to_string(), None));
    assert_eq!(rows[1], ("bond0".to_string(), Some(0)));
    // By rx pkt/s: eth0 (busier) first, each interface's queues under its
    // total, busiest first.
    app.focus = Pane::Queues;
    press(&mut app, KeyCode::Char('s'));
    let rows = order(&app);
    let first_bond = rows.iter().position(|r| r.0 == "bond0").expect("bond0");
    assert_eq!(rows[0], ("eth0".to_string(), None));
    assert!(rows[..first_bond].iter().all(|r| r.0 == "eth0"), "{rows:?}");
    assert!(
        rows[first_bond..].iter().all(|r| r.0 == "bond0"),
        "{rows:?}"
    );
    assert_eq!(rows[first_bond].1, None, "the total heads its queues");
    let frame = app.frame.as_ref().expect("frame");
    let table = super::queues::rows(frame, &app.filter, app.queue_sort);
    let rx: Vec<f64> = table[1..first_bond]
        .iter()
        .map(|r| r.rx_packets.unwrap_or(-1.0))
        .collect();
    assert!(rx.windows(2).all(|w| w[0] >= w[1]), "{rx:?}");
    // The help says so, also at 80x24.
    press(&mut app, KeyCode::Char('?'));
    let text = screen(&render(&app, Theme::plain(), 80, 24));
    assert!(text.contains("busiest interface first"), "{text}");
    assert!(text.contains("a replay waits"), "{text}");
    assert!(text.contains("<< losing"), "{text}");
}
