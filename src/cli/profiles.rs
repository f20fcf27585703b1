//! `nettune profiles`: the built-in profiles and the site profiles found,
//! each with where it comes from.

use crate::error::Status;
use crate::plan::site;

#[derive(Debug, clap::Args)]
pub struct ProfilesArgs {
    /// Print the list as JSON: name, kind (built-in or site), origin (the
    /// file), includes, description, the files it hides, and the error of
    /// a file that cannot be used.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ProfilesArgs) -> anyhow::Result<Status> {
    let dirs = site::dirs();
    let listed = site::list(&dirs);
    let text = if args.json {
        let value = serde_json::json!({
            "search_path": dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>(),
            "profiles": listed,
        });
        serde_json::to_string_pretty(&value)? + "\n"
    } else {
        render(&listed, &dirs)
    };
    crate::output::print(&text)?;
    // A site file that cannot be used is a finding: a plan naming it fails.
    Ok(if listed.iter().any(|l| l.error.is_some()) {
        Status::Findings
    } else {
        Status::Clean
    })
}

fn render(listed: &[site::Listed], dirs: &[std::path::PathBuf]) -> String {
    let width = listed.iter().map(|l| l.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for l in listed {
        let what = match (&l.error, l.includes.is_empty()) {
            (Some(e), _) => format!("unusable: {e}"),
            (None, true) => l.description.clone().unwrap_or_default(),
            (None, false) => {
                let desc = l
                    .description
                    .as_deref()
                    .map(|d| format!("{d}; "))
                    .unwrap_or_default();
                format!("{desc}includes {}", l.includes.join(" -> "))
            }
        };
        out.push_str(&format!(
            "{:<width$}  {:<8}  {}  ({})\n",
            l.name, l.kind, what, l.origin
        ));
        for hidden in &l.hides {
            out.push_str(&format!("{:<width$}            hides {hidden}\n", ""));
        }
    }
    let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    out.push_str(&format!(
        "\nsite profiles are read from {} (the first holding a name wins; ${} to change)\n",
        if searched.is_empty() {
            "nowhere".to_string()
        } else {
            searched.join(", ")
        },
        site::PATH_ENV
    ));
    out
}
