; Inno Setup 6.3+ script: a per-user (or, if chosen, all-users) installer for the one-folder bundle.
; Build the bundle first (packaging/README.md, "Windows"), then from the repository root:
;   iscc /DAppVersion=0.1.0 packaging\windows\tailor.iss
; Output: dist\Tailor-0.1.0-setup.exe. Relative paths below are relative to this script's folder.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif

[Setup]
; The AppId identifies Tailor to Windows' uninstaller across versions: never change it.
AppId={{6F1C2E4A-8B7D-4C1E-9A3F-2D5B7E0C9A41}
AppName=Tailor
AppVersion={#AppVersion}
AppPublisher=Tailor
AppComments=Chat with open language models on your own workstation
DefaultDirName={autopf}\Tailor
DefaultGroupName=Tailor
DisableProgramGroupPage=yes
; No administrator rights needed; the user may still choose an install for all users.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
SetupIconFile=..\..\assets\icons\tailor.ico
UninstallDisplayIcon={app}\Tailor.exe
OutputDir=..\..\dist
OutputBaseFilename=Tailor-{#AppVersion}-setup
; The bundle holds large DLLs (Qt, llama.cpp, with CUDA also cuBLAS) and the starter model.
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
; Tailor.exe keeps a named pipe per user; ask running copies to close before files are replaced.
CloseApplications=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "..\..\dist\tailor\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Tailor"; Filename: "{app}\Tailor.exe"
Name: "{autodesktop}\Tailor"; Filename: "{app}\Tailor.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\Tailor.exe"; Description: "{cm:LaunchProgram,Tailor}"; Flags: nowait postinstall skipifsilent

; Chats, logs and downloaded models live in the user's folders (AppData, the Hugging Face cache):
; the uninstaller leaves them, so a reinstall finds them again.
